from rlvr_cli.cli import main

main()
