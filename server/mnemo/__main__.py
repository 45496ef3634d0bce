from mnemo.cli.main import main

raise SystemExit(main())
