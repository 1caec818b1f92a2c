from kbdebug.cli import main

main()
