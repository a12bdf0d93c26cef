"""The public surface of ``cep`` is what ``__all__`` says, and each name is what it claims to be."""

from __future__ import annotations

import cep


def test_all_lists_exactly_the_public_names():
    # dir(): the names cep loads on first use (PEP 562) as well as those already loaded
    public = {name for name in dir(cep) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(cep, name)).__name__ == "module"}
    assert set(cep.__all__) == public - modules


def test_errors_form_one_hierarchy():
    for error in (cep.CepSyntaxError, cep.CepSemanticError, cep.CepRuntimeError):
        assert issubclass(error, cep.CepError)


def test_output_columns_with_and_without_types():
    q = cep.compile(open("patterns/v_shape.sql").read())
    assert q.output_columns(["symbol", "ts", "price", "volume"]) == ("symbol", "start_ts", "bottom", "end_ts", "n")
    typed = q.output_columns({"symbol": "VARCHAR", "ts": "TIMESTAMP", "price": "DOUBLE", "volume": "BIGINT"})
    assert typed == [
        ("symbol", "VARCHAR"),
        ("start_ts", "TIMESTAMP"),
        ("bottom", "DOUBLE"),
        ("end_ts", "TIMESTAMP"),
        ("n", "BIGINT"),
    ]
