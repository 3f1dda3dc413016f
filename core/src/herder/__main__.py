from herder.cli.main import main

main()
