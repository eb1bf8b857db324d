"""The two forms of a results table: markdown for docs/, aligned text
for a terminal.  @columns: the header cells; @rows: each row's cells."""


def markdown(columns, rows):
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def text(columns, rows):
    table = [list(columns)] + [list(r) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(columns))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                     for r in table)
