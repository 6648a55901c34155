#!/usr/bin/env bash
# The graph stages on real-looking captions: scene graphs -> sub-graph positives -> hard negatives
# -> texts, with every intermediate kept as Parquet for inspection with DuckDB.
#   bash examples/pipeline.sh [OUT_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-pipeline-out}
mkdir -p "$out"

mosaictool parse "$here/captions.jsonl" --workers 2 -q -o "$out/graphs.parquet"
mosaictool decompose --max 3 -q "$out/graphs.parquet" \
  | mosaictool negate --max 6 --seed 0 --text negclip,order -q -o "$out/negatives.parquet"
mosaictool template -q "$out/negatives.parquet" -o "$out/texts.jsonl"

echo "negatives by transform:"
duckdb -c "select n.transform, count(*) as n from (select unnest(negatives) as n from '$out/negatives.parquet') group by 1 order by 2 desc"
echo "one caption's texts:"
duckdb -c "select t.kind, t.text from (select unnest(texts.positives) as t from read_json('$out/texts.jsonl') where id = 'ex003')"
