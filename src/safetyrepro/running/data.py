"""Fetch the benchmark data from pinned upstream commits, checking every file's SHA-256.

The manifest pins each file to a commit of its public repository and to the hash of the
reference copy (see SOURCES.md in the shared data folder). Downloads go through
urllib, so ``base_url`` may point at any mirror laid out like raw.githubusercontent.com,
including a local ``file://`` folder.
"""

from __future__ import annotations

import hashlib
import os
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from http.client import HTTPException
from pathlib import Path

from safetyrepro.running.hashing import file_sha256

RAW_GITHUB_URL = "https://raw.githubusercontent.com"


@dataclass(frozen=True)
class DataFile:
    """One pinned file: where it lives locally and where it comes from upstream."""

    path: str  # relative to the data folder; the first component names the benchmark
    repo: str
    commit: str
    upstream_path: str
    sha256: str

    @property
    def benchmark(self) -> str:
        return self.path.split("/", 1)[0]


class DataIntegrityError(ValueError):
    """A downloaded file does not have the pinned SHA-256."""


class DownloadError(OSError):
    """A file could not be downloaded."""


def _files(repo: str, commit: str, local_dir: str, upstream_dir: str, hashes: dict[str, str]) -> tuple[DataFile, ...]:
    """Entries for files kept under the same name locally and upstream."""
    return tuple(
        DataFile(f"{local_dir}/{name}", repo, commit, f"{upstream_dir}{name}", sha) for name, sha in hashes.items()
    )


_XSTEST = ("paul-rottger/exaggerated-safety", "d7bb5bd738c1fcbc36edd83d5e7d1b71a3e2d84d")

MANIFEST: tuple[DataFile, ...] = (
    *_files(
        "nyu-mll/BBQ",
        "bea11bd97d79217245b5871acd247b9d6eb24598",
        "bbq",
        "data/",
        {
            "Age.jsonl": "46e805b3fc2d8cbd26eeb8e8430d98cf7b2dc9c83574ff3674e8ce4f0fca2a60",
            "Disability_status.jsonl": "375d40d9b71f056150264445ec189b13934998f3f49a1e311aa7578eb3b45e5f",
            "Nationality.jsonl": "a583e74666aec0341ded8aa3983e7cad694eb24de72c254d28b2df3035720090",
            "Physical_appearance.jsonl": "e48d7e13508565f4801574e611043470c25c95a0a62af3699cb5ee7cb02608fb",
            "Religion.jsonl": "cb9555f9f3454a52cd2df85956b59bd7fcca5aa922c8527693b1164d08417616",
            "Sexual_orientation.jsonl": "2c71036b9e7584fe589c42aef32c1a42bc01b9a5e9b1b8704342630cdb08cefd",
        },
    ),
    *_files(
        "nyu-mll/crows-pairs",
        "8aaac11c485473159ec9328a65253a5be9a479dc",
        "crows_pairs",
        "data/",
        {
            "crows_pairs_anonymized.csv": "dfb36986ce0502abbaf7055b9176da3d08d48e07df1251991b5dfbcbceab9d0c",
        },
    ),
    *_files(
        "microsoft/TOXIGEN",
        "01517e814639e0334c920a3c502036c8158aac87",
        "toxigen",
        "demonstrations/",
        {
            "disability/hate_mental_disability_sentences.txt": "5006966f3bb6816f27d898ba161064c67d78388e3c9b679e0ce2fba6331b3c5e",
            "disability/hate_physical_disability_sentences.txt": "42f0f861365f9090aedd2cd9d132576556744e0eeb7bdacd9f96b69b30d337ac",
            "disability/neutral_mental_disability_sentences.txt": "31ee714e95dc3bbf35052cde3398882be47d32e9c18586605d52cb5c550e8cb5",
            "disability/neutral_physical_disability_sentences.txt": "ed458178e21a86bdcb40a6b3039e87580a76bf3e1ee5f0d764ec76ae35480a07",
            "nationality/hate_chinese_sentences.txt": "8424a44c9170fffc80a7d69dcc642672343c94d494f07117bb6dc5c17f631e4f",
            "nationality/hate_immigrant_sentences.txt": "91647bbd4238970592b6776be9adc99a6c943bee11206409782d70c610b2e549",
            "nationality/hate_mexican_sentences.txt": "d0db66c68504642cde26c93026809ced3a9a2190ea782e39c90d9d0a36d4aa1b",
            "nationality/hate_middle_east_sentences.txt": "e4a50352d900eaa093a0f7038af8deca09d2e9ceb0d0f3e1c5177f807816bd09",
            "nationality/neutral_chinese_sentences.txt": "3473e4260c4fdedf807504be6a58d2443735c5d8f4786b6599b633525d565eb4",
            "nationality/neutral_immigrant_sentences.txt": "8beeb5f52e77753473f8c938b8a0e938c4ffdd563b441f1c5881a211614888cc",
            "nationality/neutral_mexican_sentences.txt": "c1fe95bf1f21e73e073d3543e195f1d92a69cf6247b43e934b80f13be472e095",
            "nationality/neutral_middle_east_sentences.txt": "db19fbfaf0cdf748719ac1c4c0daa291c8d58b781b8a55fb03b729f563c4352c",
            "race/hate_asian_sentences.txt": "3bdc5ac4af53e1d4f77b9a21d19540045ae2ae3ce35577ee4678ad65b02e1688",
            "race/hate_black_sentences.txt": "43296e909b48adacf843d6673f9724f912b1b0eed77e4c49e9135e47585718d0",
            "race/hate_jewish_sentences.txt": "edf9af973e4fe3f11daf260a1d58465b1328bfe8c4305e0660427ea807e20072",
            "race/hate_latino_sentences.txt": "f8cc92e2f658c75b5d6d5816b6ec51d6edfe6a9bed2f5782a16d00c9a241ee4b",
            "race/hate_native_american_sentences.txt": "0e58e77d7b6d22a70d5caf60a37277f2189fb8eb65f4eb6e7a334e1ff417635b",
            "race/neutral_asian_sentences.txt": "fa793ba444f6eec89e3fcf253956ca1272d7df64cb9bd79a826019449e70959e",
            "race/neutral_black_sentences.txt": "ffa52d9303b13e24e5e1d4b1227204460a7d32ac6b75c1968d752fdb78aaf321",
            "race/neutral_jewish_sentences.txt": "436fe727f604462b87045e7a54ed19d7d176a168f7e49b836382dea205c02579",
            "race/neutral_latino_sentences.txt": "8b7f1a1cf07b9c81a10f9ece369b39fa23346c90ec419f9be418a4c8bd3f0e9f",
            "race/neutral_native_american_sentences.txt": "7d85de9e33acb6d5d58ca25036050720c9787c1f897f9ada3944249779be8513",
            "religion/hate_muslim.txt": "9c6199a69fc64a1d2d96dc8e8a186004bf13b76697391504aacc830066f2ed4e",
            "religion/hate_muslim_sentences.txt": "7716c645ac42e39d60edb16f14e972e02f6bcd057e7673dffd9bcc2ca4f93bd3",
            # neutral_muslim.txt and neutral_muslim_sentences.txt have identical content upstream.
            "religion/neutral_muslim.txt": "62bed8bd9192cd3805623a094e113ce531a658752b0e0fdd9a4f0b09e4cad2fc",
            "religion/neutral_muslim_sentences.txt": "62bed8bd9192cd3805623a094e113ce531a658752b0e0fdd9a4f0b09e4cad2fc",
            "sexual_orientation/hate_bisexual.txt": "e87b39ecdef41950ce0035fb091d862a60d1686021611d458ae047849aff6616",
            "sexual_orientation/hate_lgbtq.txt": "b13aecf6ac5e3ff62cc8743d9790c09de7a242f9e635fd5102ad345fd799dd0b",
            "sexual_orientation/neutral_bisexual.txt": "44f82d8d4c66e4755143741101531c60d7cf17a10df19f24dceb37c84bab5ce0",
            "sexual_orientation/neutral_lgbtq.txt": "932c9b1f59911d862df8ccba5da9d7d486a5750cf344139a241b6c477d68a8e3",
        },
    ),
    # A copy of sylinrl/TruthfulQA's TruthfulQA.csv, pinned in a repository that keeps it.
    *_files(
        "benedictflorance/truthfulqa_experiments",
        "6fdfd38288e86296582a584694df5cf43d1f634a",
        "truthfulqa",
        "datasets/",
        {
            "TruthfulQA.csv": "99d6ae7755e3b435eade956068c9de7c0c474770344237aeb66b56519ba4b697",
        },
    ),
    *_files(
        *_XSTEST,
        "xstest",
        "",
        {
            "xstest_prompts.csv": "11783fb294ed017473ee53c207d71f2161c7672c8d0b037501e78387f801cb5a",
        },
    ),
    # The labelled completions are renamed locally (upstream: *_streval.csv).
    DataFile(
        "xstest/xstest_v2_completions_mistralinstruct_labelled.csv",
        *_XSTEST,
        "evaluation/automated_evaluation_labels/xstest_v2_completions_mistralinstruct_streval.csv",
        "a1ad24b837a13380a88f9748b39663add74cd992d5841db782271490dcbb41d3",
    ),
    DataFile(
        "xstest/xstest_v2_completions_llama2new_labelled.csv",
        *_XSTEST,
        "evaluation/automated_evaluation_labels/xstest_v2_completions_llama2new_streval.csv",
        "605183b95c8859673ff23898456a1fea24fbbd5993b9033dc7c12159227e3555",
    ),
)

BENCHMARKS: tuple[str, ...] = tuple(dict.fromkeys(entry.benchmark for entry in MANIFEST))


def url_for(entry: DataFile, base_url: str | None = None) -> str:
    """The download URL of ``entry``: raw.githubusercontent.com, or a mirror with its layout."""
    base = (base_url or RAW_GITHUB_URL).rstrip("/")
    return f"{base}/{entry.repo}/{entry.commit}/{entry.upstream_path}"


def _select(benchmarks: Iterable[str] | None) -> list[DataFile]:
    if benchmarks is None:
        return list(MANIFEST)
    wanted = set(benchmarks)
    if unknown := wanted.difference(BENCHMARKS):
        raise ValueError(f"unknown benchmark(s) {sorted(unknown)}; known: {list(BENCHMARKS)}")
    return [entry for entry in MANIFEST if entry.benchmark in wanted]


def _download(entry: DataFile, target: Path, url: str) -> None:
    """Download ``url`` to a temporary file next to ``target``, check it, then move it in place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        digest = hashlib.sha256()
        try:
            with urllib.request.urlopen(url, timeout=60) as response, tmp.open("wb") as out:
                for chunk in iter(lambda: response.read(1 << 20), b""):
                    out.write(chunk)
                    digest.update(chunk)
        except (OSError, HTTPException) as exc:
            raise DownloadError(f"could not download {url}: {exc}") from exc
        if digest.hexdigest() != entry.sha256:
            raise DataIntegrityError(
                f"{entry.path}: SHA-256 mismatch for {url}: expected {entry.sha256}, got {digest.hexdigest()}"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def fetch_data(
    data_dir: str | os.PathLike, base_url: str | None = None, benchmarks: Iterable[str] | None = None
) -> list[Path]:
    """Download the manifest's files (optionally only ``benchmarks``) into ``data_dir``.

    Files already present with the pinned hash are left alone. Returns the paths that were
    downloaded. Raises DataIntegrityError on a hash mismatch and DownloadError when a
    download fails; neither leaves a partial file behind.
    """
    downloaded = []
    for entry in _select(benchmarks):
        target = Path(data_dir) / entry.path
        if target.is_file() and file_sha256(target) == entry.sha256:
            continue
        _download(entry, target, url_for(entry, base_url))
        downloaded.append(target)
    return downloaded


def verify_data(data_dir: str | os.PathLike, benchmarks: Iterable[str] | None = None) -> list[str]:
    """Check the manifest's files (optionally only ``benchmarks``) in ``data_dir``.

    Returns one message per missing file or hash mismatch; an empty list means all is well.
    """
    problems = []
    for entry in _select(benchmarks):
        path = Path(data_dir) / entry.path
        if not path.is_file():
            problems.append(f"missing: {path}")
        elif (actual := file_sha256(path)) != entry.sha256:
            problems.append(f"hash mismatch: {path}: expected {entry.sha256}, got {actual}")
    return problems
