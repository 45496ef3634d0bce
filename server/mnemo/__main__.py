from mnemo.cli import main

raise SystemExit(main())
