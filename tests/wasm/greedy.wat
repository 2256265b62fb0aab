;; A filter that asks for 1,024 more pages (64 MiB) than it has: past any test's limit.
  (func (export "filter") (param $req i32) (param $len i32) (result i64)
    (drop (memory.grow (i32.const 1024)))
    (call $answer (i32.const 288) (i32.const 2)))
