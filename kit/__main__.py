from recoverykit.cli import main

main()
