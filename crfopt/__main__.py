from crfopt.apps.cli import main

main()
