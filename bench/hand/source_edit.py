"""Shared by the hand experiments' context editors (bench/hand/*.py that rewrite a scratch copy
of a replayed tip): exact replacements that fail loudly when the text is not what the
experiment was written against, and a new tuning parameter in the manifest."""


class Source:
    """A kernel file being edited: each replacement must find its text exactly `count` times."""

    def __init__(self, path):
        self.path = path
        self.text = open(path).read()

    def sub(self, old, new, count=1):
        found = self.text.count(old)
        assert found == count, f"{self.path}: expected {count} of {old!r}, found {found}"
        self.text = self.text.replace(old, new)

    def save(self):
        with open(self.path, "w") as f:
            f.write(self.text)


def add_tuning(manifest, name, values, before):
    """A tuning parameter NAME with these values, placed before the manifest's section `before`."""
    text = open(manifest).read()
    assert f"[tuning.{name}]" not in text, f"{manifest}: {name} is already a tuning parameter"
    assert before in text, f"{manifest}: no {before}"
    text = text.replace(before, f"[tuning.{name}]\nvalues = [{', '.join(str(v) for v in values)}]\n\n{before}", 1)
    with open(manifest, "w") as f:
        f.write(text)
