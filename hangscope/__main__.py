from hangscope.cli import run

run()
