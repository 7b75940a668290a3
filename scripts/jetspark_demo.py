"""``jetspark demo`` as a file for ``spark-submit`` (which runs files, not console commands).

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/spark-submit --master spark://127.0.0.1:7077 \\
        scripts/jetspark_demo.py --external --records 5000
"""

import sys

from jetspark.devtools.cli import main

if __name__ == "__main__":
    sys.exit(main(["demo", *sys.argv[1:]]))
