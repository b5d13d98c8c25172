"""A plugin whose import error reads like rich markup: square brackets, as pip's extras
and numpy's dtypes write them."""

raise ImportError("vyre_markup_import needs the [cuda] extra: pip install 'vyre-markup[cuda]' "
                  "([/] [bold red]x[/bold red] [link=file://x])")
