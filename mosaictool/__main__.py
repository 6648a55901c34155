from mosaictool.cli import main

main()
