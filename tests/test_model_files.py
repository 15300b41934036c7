"""Model files are read with limits, and every malformed one is a ModelFormatError.

Found by probing (issue 17): a 2 MB zip bomb reached 2.1 GB of memory before it was
rejected, malformed metadata raised AttributeError/ValueError/MemoryError tracebacks,
and a label containing a newline injected lines into ``crfopt tag`` output.
"""

from __future__ import annotations

import io
import json
import re
import tracemalloc
import zipfile

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import crfopt
from crfopt.apps import model as model_module
from crfopt.apps.cli import main
from crfopt.apps.model import Model, ModelFormatError
from crfopt.apps.train import train
from crfopt.data.corpus import load_corpus

CORPUS = """\
the DT B-NP
cat NN I-NP
sat VB B-VP

a DT B-NP
dog NN I-NP
ran VB B-VP
home RB B-ADVP

the DT B-NP
dog NN I-NP
"""


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """A real small model file, trained and saved as ``crfopt train`` does."""
    d = tmp_path_factory.mktemp("model")
    (d / "train.txt").write_text(CORPUS)
    problem = load_corpus(d / "train.txt", template="chunking")
    model = train(problem, "lbfgs", passes=3).model
    path = model.save(d / "m.crfopt")
    return path, model


def entries_of(path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def npy(arr) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.asarray(arr), allow_pickle=True)
    return buf.getvalue()


def text(obj) -> bytes:
    return npy(np.frombuffer(json.dumps(obj).encode(), dtype=np.uint8))


def untext(data: bytes):
    return json.loads(bytes(np.load(io.BytesIO(data))).decode())


def write_zip(path, entries: dict[str, bytes]):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return path


def test_a_real_model_round_trips_within_its_own_size(real, tmp_path):
    path, model = real
    back = Model.load(path)
    assert back.labels == model.labels and back.attributes == model.attributes
    np.testing.assert_array_equal(back.emission, model.emission)
    np.testing.assert_array_equal(back.transition, model.transition)
    np.testing.assert_array_equal(back.bias, model.bias)
    with zipfile.ZipFile(path) as zf:
        declared = sum(i.file_size for i in zf.infolist())
    assert Model.load(path, max_bytes=declared).labels == model.labels
    with pytest.raises(ModelFormatError, match=f"declare {declared:,} bytes uncompressed"):
        Model.load(path, max_bytes=declared - 1)


# ------------------------------------------------------------------------ zip bombs
K_BOMB = 5793  # a K×K float64 transition of 268 MB that deflates to ~260 KB


def _bomb(path, real_entries, key: str, shape: tuple[int, ...], **replace: bytes):
    """``real_entries`` with ``key`` replaced by zeros of ``shape`` (streamed, never in
    memory here), plus the ``replace``d entries."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in {**real_entries, **replace}.items():
            if name != f"{key}.npy":
                zf.writestr(name, data)
        with zf.open(f"{key}.npy", "w", force_zip64=True) as f:
            header = {"descr": "<f8", "fortran_order": False, "shape": shape}
            np.lib.format.write_array_header_1_0(f, header)
            left, chunk = int(np.prod(shape)) * 8, bytes(2**22)
            while left > 0:
                f.write(chunk[: min(left, len(chunk))])
                left -= len(chunk)
    return path


@pytest.fixture(scope="module")
def bombs(real, tmp_path_factory):
    d = tmp_path_factory.mktemp("bombs")
    base = entries_of(real[0])
    labels = [f"L{k}" for k in range(K_BOMB)]
    A = len(real[1].attributes)
    consistent = _bomb(
        d / "consistent.crfopt",
        base,
        "transition",
        (K_BOMB, K_BOMB),
        **{
            "labels.npy": text(labels),
            "emission.npy": npy(np.random.default_rng(0).normal(size=(K_BOMB, A))),
            "bias.npy": npy(np.zeros((K_BOMB, 3))),
        },
    )
    # the emission claims 8 million attributes; the attribute list holds a handful
    wide = _bomb(d / "wide.crfopt", base, "emission", (len(real[1].labels), 2**23))
    return {"consistent": consistent, "wide": wide}


def _peak_of_load(path, **kwargs) -> tuple[str, int]:
    tracemalloc.start()
    try:
        with pytest.raises(ModelFormatError) as info:
            Model.load(path, **kwargs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return str(info.value), peak


_RATIO = r"compressed bytes to {} \(over 200:1\)"


@pytest.mark.parametrize(
    ("bomb", "ratio_check", "kwargs", "message"),
    [
        ("consistent", True, {}, r"'transition' expands .* " + _RATIO.format("268,470,920")),
        ("wide", True, {}, r"'emission' expands .* " + _RATIO.format("[0-9,]+")),
        # with the ratio check out of the way, the other limits still hold
        ("consistent", False, {"max_bytes": 2**26}, r"over the limit of 67,108,864"),
        ("wide", False, {}, r"the attribute list is too short for 8388608 names"),
    ],
)
def test_zip_bombs_are_refused_before_decompressing(
    bombs, monkeypatch, bomb, ratio_check, kwargs, message
):
    """Independent truth: tracemalloc's peak while loading. The old loader decompressed
    every entry (268 MB here, 2.1 GB in the issue's bomb) before checking anything."""
    if not ratio_check:
        monkeypatch.setattr(model_module, "_MAX_RATIO", 10**9)
    text_, peak = _peak_of_load(bombs[bomb], **kwargs)
    assert peak < 8 * 2**20, f"{peak:,} bytes allocated before refusing"
    assert re.search(message, text_), text_


# ------------------------------------------------------------------ malformed files
def _meta_edit(**changes):
    def edit(entries):
        meta = untext(entries["meta.npy"])
        for k, v in changes.items():
            if v is _DROP:
                meta.pop(k, None)
            else:
                meta[k] = v
        entries["meta.npy"] = text(meta)

    return edit


_DROP = object()


def _set(name, data):
    def edit(entries):
        entries[name] = data

    return edit


def _drop(name):
    def edit(entries):
        del entries[name]

    return edit


def _labels(fn):
    def edit(entries):
        entries["labels.npy"] = text(fn(untext(entries["labels.npy"])))

    return edit


def _weights(name, fn):
    def edit(entries):
        entries[name] = npy(fn(np.load(io.BytesIO(entries[name]))))

    return edit


MALFORMED = {
    "meta is a list": (_set("meta.npy", text([1, 2])), r"bad metadata \(a JSON list"),
    "meta is not JSON": (
        _set("meta.npy", npy(np.frombuffer(b"{nope", dtype=np.uint8))),
        r"entry 'meta' is not valid UTF-8 JSON",
    ),
    "meta is not UTF-8": (
        _set("meta.npy", npy(np.frombuffer(b'{"\xff": 1}', dtype=np.uint8))),
        r"entry 'meta' is not valid UTF-8 JSON",
    ),
    "meta without format": (_meta_edit(format=_DROP), r"not a crfopt model \(format None\)"),
    "version as a string": (_meta_edit(version="1"), r"model format version '1'"),
    "version true": (_meta_edit(version=True), r"model format version True"),
    "bias not a bool": (_meta_edit(bias="yes"), r"'bias' must be true or false"),
    "bias block missing": (_drop("bias.npy"), r"bias=true but the bias block is absent"),
    "training a list": (_meta_edit(training=[1]), r"'training' must be an object"),
    "corpus a string": (_meta_edit(training={"corpus": "x"}), r"'training.corpus' is malformed"),
    "columns not strings": (
        _meta_edit(training={"corpus": {"columns": [1, 2]}}),
        r"'training.corpus' is malformed",
    ),
    "template garbage": (_meta_edit(template={"features": 3}), r"'template' is invalid"),
    "template parts": (
        _meta_edit(template={"features": [{"name": "w", "parts": [[1]]}]}),
        r"'template' is invalid",
    ),
    "labels a dict": (_labels(lambda x: {"a": 1}), r"expected a list of label names"),
    "labels numbers": (_labels(lambda x: list(range(len(x)))), r"label 0 is a int"),
    "labels duplicated": (_labels(lambda x: [x[0]] * len(x)), r"occurs more than once"),
    "one label too few": (_labels(lambda x: x[:-1]), r"label names for \d+ weight rows"),
    "label with newline": (_labels(lambda x: ["B-NP\nINJECTED", *x[1:]]), r"U\+000A"),
    "label with ESC": (_labels(lambda x: ["\x1b[31mB", *x[1:]]), r"U\+001B"),
    "label with tab": (_labels(lambda x: ["B\tX", *x[1:]]), r"U\+0009"),
    "label with U+2028": (_labels(lambda x: ["B\u2028X", *x[1:]]), r"U\+2028"),
    "empty label": (_labels(lambda x: ["", *x[1:]]), r"label 0 is empty"),
    "attributes numbers": (
        _set("attributes.npy", text(list(range(200)))),
        r"attribute names must all be strings",
    ),
    "attributes duplicated": (
        lambda e: e.__setitem__("attributes.npy", text(["a"] * len(untext(e["attributes.npy"])))),
        r"attribute names are not unique",
    ),
    "emission int64": (_weights("emission.npy", lambda a: a.astype(np.int64)), r"dtype <i8"),
    "emission float32": (_weights("emission.npy", lambda a: a.astype(np.float32)), r"dtype <f4"),
    "emission object": (
        _weights("emission.npy", lambda a: a.astype(object)),
        r"dtype \|O|dtype object|not a readable",
    ),
    "emission 3-D": (_weights("emission.npy", lambda a: a[None]), r"expected 2 dimension"),
    "emission transposed": (_weights("emission.npy", lambda a: a.T.copy()), r"has shape"),
    "transition wrong": (_weights("transition.npy", lambda a: a[:-1]), r"transition has shape"),
    "bias wrong": (_weights("bias.npy", lambda a: a[:, :2]), r"bias has shape"),
    "NaN weights": (
        _weights("transition.npy", lambda a: np.where(a == a.max(), np.nan, a)),
        r"transition weights are not all finite",
    ),
    "unknown entry": (_set("evil.npy", npy(np.zeros(3))), r"unexpected entry 'evil.npy'"),
    "no emission": (_drop("emission.npy"), r"missing entries \['emission'\]"),
    "npy version 3": (
        _weights("labels.npy", lambda a: a),
        None,  # replaced below by a header of version 3.0
    ),
}


def _version3(entries):
    data = bytearray(entries["labels.npy"])
    data[6] = 3  # the major version byte after the magic
    entries["labels.npy"] = bytes(data)


MALFORMED["npy version 3"] = (_version3, r"unsupported .npy version \(3, 0\)")


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_models_are_model_format_errors(real, tmp_path, case):
    edit, message = MALFORMED[case]
    entries = entries_of(real[0])
    edit(entries)
    path = write_zip(tmp_path / "bad.crfopt", entries)
    with pytest.raises(ModelFormatError, match=message) as info:
        Model.load(path)
    assert str(info.value).startswith(str(path))


def test_an_encrypted_entry_is_a_model_format_error(real, tmp_path):
    raw = bytearray(real[0].read_bytes())
    for signature, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # local, central
        at = raw.index(signature)
        raw[at + flag_at] |= 1  # general purpose flag bit 0: encrypted
    (tmp_path / "enc.crfopt").write_bytes(bytes(raw))
    with pytest.raises(ModelFormatError, match=r"RuntimeError: File .* is encrypted"):
        Model.load(tmp_path / "enc.crfopt")


def test_not_a_zip_and_a_missing_file(tmp_path):
    (tmp_path / "x.crfopt").write_bytes(b"PK\x03\x04" + bytes(100))
    with pytest.raises(ModelFormatError, match="not a readable crfopt model file"):
        Model.load(tmp_path / "x.crfopt")
    with pytest.raises(FileNotFoundError):
        Model.load(tmp_path / "absent.crfopt")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_flips_and_truncations_raise_only_model_format_errors(real, tmp_path_factory, data):
    """Random damage to a real model file: it loads (the damage missed everything that
    matters) or raises ModelFormatError, never anything else."""
    raw = bytearray(real[0].read_bytes())
    for _ in range(data.draw(st.integers(0, 6), label="flips")):
        pos = data.draw(st.integers(0, len(raw) - 1), label="position")
        raw[pos] ^= data.draw(st.integers(1, 255), label="xor")
    if data.draw(st.booleans(), label="truncate"):
        raw = raw[: data.draw(st.integers(0, len(raw)), label="length")]
    path = tmp_path_factory.mktemp("fuzz") / "m.crfopt"
    path.write_bytes(bytes(raw))
    try:
        back = Model.load(path)
    except ModelFormatError:
        return
    assert back.emission.shape == (len(back.labels), len(back.attributes))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_entry_contents_raise_only_model_format_errors(real, tmp_path_factory, data):
    """The same for damage *inside* an entry (re-zipped with a valid CRC, so the .npy
    header, the JSON and the weights themselves are what the loader has to judge)."""
    entries = entries_of(real[0])
    name = data.draw(st.sampled_from(sorted(entries)), label="entry")
    raw = bytearray(entries[name])
    for _ in range(data.draw(st.integers(1, 4), label="flips")):
        pos = data.draw(st.integers(0, len(raw) - 1), label="position")
        raw[pos] ^= data.draw(st.integers(1, 255), label="xor")
    if data.draw(st.booleans(), label="truncate"):
        raw = raw[: data.draw(st.integers(0, len(raw)), label="length")]
    entries[name] = bytes(raw)
    path = write_zip(tmp_path_factory.mktemp("fuzz") / "m.crfopt", entries)
    try:
        back = Model.load(path)
    except ModelFormatError:
        return
    assert back.emission.shape == (len(back.labels), len(back.attributes))


# ------------------------------------------------------------------ label names
def test_labels_with_control_characters_are_refused_at_training(tmp_path):
    seqs = crfopt.Sequences(
        lengths=np.array([2, 1]),
        labels=np.array([0, 1, 2]),
        indptr=np.array([0, 1, 2, 3]),
        indices=np.array([0, 1, 0]),
        values=np.ones(3),
    )
    bad = crfopt.CRFProblem(
        seqs, n_labels=3, n_attributes=2, label_names=["O", "B-X\nINJECTED", "I-X"]
    )
    with pytest.raises(ModelFormatError, match=r"label 1 \('B-X\\nINJECTED'\) contains U\+000A"):
        train(bad, "lbfgs", passes=1)
    # the same check guards a model built directly (Estimator, Model.from_problem)
    with pytest.raises(ModelFormatError, match=r"U\+001B"):
        Model(["O", "\x1b[2J"], ["a"], np.zeros((2, 1)), None, np.zeros((2, 2)))


def test_tag_output_cannot_be_injected_by_a_label(real, tmp_path):
    """The issue's attack: a model file whose label holds a newline. ``crfopt tag``
    refuses it instead of writing extra lines."""
    entries = entries_of(real[0])
    _labels(lambda x: [f"{x[0]}\nFAKE LINE", *x[1:]])(entries)
    path = write_zip(tmp_path / "evil.crfopt", entries)
    (tmp_path / "in.txt").write_text("the DT\ncat NN\n")
    res = CliRunner().invoke(main, ["tag", "--model", str(path), str(tmp_path / "in.txt")])
    assert res.exit_code == 2, res.output
    assert not any(line.startswith("FAKE LINE") for line in res.output.splitlines())
    assert "contains U+000A" in res.output
