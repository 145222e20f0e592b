from tinygrad.llm.cli import main

main()
