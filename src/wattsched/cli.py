"""Command-line interface (placeholder until the subcommands land)."""


def main(argv=None) -> int:
    return 0
