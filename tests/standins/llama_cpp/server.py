import sys

from engine import serve

if __name__ == "__main__":
    serve(sys.argv[1:])
