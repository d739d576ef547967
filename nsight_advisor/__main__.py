"""``python -m nsight_advisor``: the same command line as ``nsight-advisor``."""

from nsight_advisor.cli import run

if __name__ == "__main__":
    run()
