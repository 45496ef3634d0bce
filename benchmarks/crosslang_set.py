"""A small cross-language retrieval set of our own: English questions about Chinese notes, and the reverse.

Twenty notes the way a bilingual user keeps them (ten written in Chinese, ten in English, one topic each, some
topics close to each other so a question has near misses), plus six distractor notes in each language. Each
question is written in the *other* language than its note and shares no word with it (an English question
cannot share words with a Chinese note; the Chinese questions avoid the notes' English names), so keyword
search cannot answer it: only a model that maps both languages into one space can. Used by
benchmarks/bench_multilingual.py (Recall@5, MRR@10); hand-written, no randomness.
"""

from __future__ import annotations

NOTES: dict[str, str] = {
    # -- notes written in Chinese -------------------------------------------------------------------------
    "memory/zh-deploy.md": "# 部署事故\n\n上周五晚上发布新版本时，数据库迁移脚本锁住了订单表，网站停了四十分钟。"
    "以后迁移要先在预发布环境演练，并且避开高峰时段。\n",
    "memory/zh-dentist.md": "# 看牙\n\n下个月三号上午十点在社区口腔诊所洗牙，医生提醒右下方那颗智齿可能要拔掉。\n",
    "memory/zh-garden.md": "# 阳台种菜\n\n番茄苗每天浇一次水，叶子发黄是因为缺氮，改用稀释的豆饼水施肥后长得好多了。\n",
    "memory/zh-budget.md": "# 家庭开支\n\n这个月房租涨了三百元，决定取消两个视频网站会员，外卖每周最多两次。\n",
    "memory/zh-travel.md": "# 成都旅行\n\n国庆假期去成都五天，订了宽窄巷子附近的民宿，必须去看大熊猫基地，记得提前网上预约门票。\n",
    "memory/zh-cat.md": "# 猫咪体检\n\n小橘今年打了三联疫苗，兽医说它偏胖，猫粮每天减到五十克，多陪它玩逗猫棒。\n",
    "memory/zh-piano.md": "# 学钢琴\n\n每天练琴半小时，老师让我先把哈农练习曲第一条弹熟，左手的指法还不够独立。\n",
    "memory/zh-recipe.md": "# 红烧肉做法\n\n五花肉切块焯水，冰糖炒出糖色，加生抽老抽和八角小火炖一个小时，最后大火收汁。\n",
    "memory/zh-running.md": "# 跑步计划\n\n目标是明年春天跑完半程马拉松，现在每周跑三次，每次五公里，膝盖疼就休息一天。\n",
    "memory/zh-car.md": "# 汽车保养\n\n车子开到一万五千公里了，四月底要去4S店换机油和空调滤芯，轮胎也该换位了。\n",
    # -- notes written in English -------------------------------------------------------------------------
    "memory/en-backup.md": "# Backups\n\nThe NAS copies the photo library to an external drive every Sunday night; "
    "the offsite copy goes to cloud storage once a month. Restore was tested in March and took two hours.\n",
    "memory/en-flight.md": "# Trip to Lisbon\n\nFlight leaves Tuesday at 7:40 from terminal 2. Hotel is "
    "near the old tram line; bring the power adapter and print the boarding pass.\n",
    "memory/en-allergy.md": "# Allergies\n\nMy daughter is allergic to peanuts and shellfish. Always carry "
    "the epinephrine pen when we eat out and tell the waiter before ordering.\n",
    "memory/en-interview.md": "# Hiring\n\nInterviewed a candidate for the backend role: strong on "
    "distributed systems, weak on testing. Second round with the team lead next Thursday.\n",
    "memory/en-bike.md": "# Bicycle repair\n\nThe rear brake pads are worn out and the chain squeaks. "
    "Ordered new pads online; oil the chain every two weeks in the rainy season.\n",
    "memory/en-book.md": "# Reading\n\nFinished a novel about a lighthouse keeper on a remote island. "
    "Next on the list: a history of the silk road and a biography of a famous physicist.\n",
    "memory/en-mortgage.md": "# Mortgage\n\nThe bank offered to refinance the house loan at a lower "
    "interest rate; the fixed term ends in June, compare offers from two other lenders before signing.\n",
    "memory/en-sleep.md": "# Sleep\n\nNo coffee after two in the afternoon, screens off at ten thirty. "
    "Falling asleep faster since the bedroom got blackout curtains.\n",
    "memory/en-birthday.md": "# Mom's birthday\n\nMom turns sixty in August. Plan a dinner at her "
    "favourite seafood restaurant and order a photo album of the family as a gift.\n",
    "memory/en-laptop.md": "# Laptop\n\nThe laptop battery drains in two hours now. The warranty covers "
    "the battery until November, so book a repair at the service centre before then.\n",
    # -- distractors ----------------------------------------------------------------------------------------
    "memory/zh-d1.md": "# 周会记录\n\n产品经理说下季度重点是会员增长，设计稿下周二评审。\n",
    "memory/zh-d2.md": "# 读书笔记\n\n这本管理学的书讲如何开好一对一谈话，核心是多听少说。\n",
    "memory/zh-d3.md": "# 搬家\n\n新房子离地铁站步行十分钟，网络宽带要提前一周预约安装。\n",
    "memory/zh-d4.md": "# 天气\n\n这几天一直下雨，晾衣服只能用烘干机，电费会高一点。\n",
    "memory/zh-d5.md": "# 学英语\n\n每天背二十个单词，周末看一部不带字幕的电影。\n",
    "memory/zh-d6.md": "# 朋友聚会\n\n周六在火锅店给老同学接风，一共八个人，需要提前订包间。\n",
    "memory/en-d1.md": "# Standup\n\nThe search service migration is blocked on the schema review; ping the DBA.\n",
    "memory/en-d2.md": "# Groceries\n\nOat milk, eggs, spinach, rice, dish soap and batteries for the remote.\n",
    "memory/en-d3.md": "# Podcast\n\nAn episode on how cities plan public transport: buses beat trams on cost.\n",
    "memory/en-d4.md": "# Garden shed\n\nThe shed roof leaks in the corner; buy roofing felt and nails.\n",
    "memory/en-d5.md": "# Taxes\n\nFile the tax return by the end of April; keep receipts for the home office.\n",
    "memory/en-d6.md": "# Neighbours\n\nThe neighbours are renovating their kitchen until the end of the month.\n",
}

QUERIES: list[tuple[str, str, str]] = [
    # (id, question, relevant note): English questions about Chinese notes
    ("en2zh-1", "Why did the website go down during last week's release?", "memory/zh-deploy.md"),
    ("en2zh-2", "When is my teeth cleaning appointment?", "memory/zh-dentist.md"),
    ("en2zh-3", "Why are the tomato leaves turning yellow?", "memory/zh-garden.md"),
    ("en2zh-4", "Which subscriptions did we cancel to save money?", "memory/zh-budget.md"),
    ("en2zh-5", "Where are we staying in Chengdu over the holiday?", "memory/zh-travel.md"),
    ("en2zh-6", "How much food should the cat get each day?", "memory/zh-cat.md"),
    ("en2zh-7", "What exercise did my music teacher assign?", "memory/zh-piano.md"),
    ("en2zh-8", "How do I cook braised pork belly?", "memory/zh-recipe.md"),
    ("en2zh-9", "What is my half marathon training schedule?", "memory/zh-running.md"),
    ("en2zh-10", "When is the car due for an oil change?", "memory/zh-car.md"),
    # Chinese questions about English notes
    ("zh2en-1", "照片多久备份一次？", "memory/en-backup.md"),
    ("zh2en-2", "去里斯本的航班几点起飞？", "memory/en-flight.md"),
    ("zh2en-3", "女儿对什么食物过敏？", "memory/en-allergy.md"),
    ("zh2en-4", "后端岗位的候选人面试表现怎么样？", "memory/en-interview.md"),
    ("zh2en-5", "自行车刹车有什么问题？", "memory/en-bike.md"),
    ("zh2en-6", "我最近读完了哪本小说？", "memory/en-book.md"),
    ("zh2en-7", "房贷重新贷款的利率怎么样？", "memory/en-mortgage.md"),
    ("zh2en-8", "怎样才能睡得更好？", "memory/en-sleep.md"),
    ("zh2en-9", "妈妈的生日礼物准备了什么？", "memory/en-birthday.md"),
    ("zh2en-10", "笔记本电脑电池的保修到什么时候？", "memory/en-laptop.md"),
]
