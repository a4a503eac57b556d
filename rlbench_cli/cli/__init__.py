"""The Typer command-line interface. Commands parse options and call the library; no work happens here."""
