"""Where rig's results go besides its own files: an MLflow tracking server (`mlflow`) and Inspect eval logs
(`inspect_log`). Each reads run folders only through `RunFolder` and renders what `RunSummary` and the benchmarks'
tables already computed; the libraries they speak to are extras, imported inside the calls that need them."""
