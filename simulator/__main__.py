"""`python -m simulator`: write the demo month (options: `python -m simulator --help`)."""

from simulator.demo import main

if __name__ == "__main__":
    main()
