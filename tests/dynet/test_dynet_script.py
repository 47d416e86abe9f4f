"""A script written for DyNet runs with only its import line changed."""
import pathlib

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "data" / "dynet_tagger.py"


def test_dynet_training_script_runs_unchanged(tmp_path):
    source = SCRIPT.read_text()
    assert source.count("import dynet as dy") == 1
    namespace = {"SAVE_TO": str(tmp_path / "tagger")}
    exec(compile(source.replace("import dynet as dy", "import autobatch as dy"), str(SCRIPT), "exec"),
         namespace)
    losses = namespace["losses"]
    assert losses[-1] < 0.5 * losses[0]
    assert namespace["accuracy"] > 0.9
