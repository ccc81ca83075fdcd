from kbgen.cli import main

main()
