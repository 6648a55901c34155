"""Pure stage logic: Iterable[dict] -> Iterator[dict]; no CLI, no stdin/stdout, no exit."""
