"""``python -m nsight_advisor``: the same command line as ``nsight-advisor``."""

from nsight_advisor.cli import main

if __name__ == "__main__":
    main()
