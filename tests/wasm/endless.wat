;; A filter that never answers: it loops until its fuel runs out.
  (func (export "filter") (param $req i32) (param $len i32) (result i64)
    (loop $forever (br $forever))
    (call $approve))
