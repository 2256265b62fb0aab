;; A filter that answers a body that is not JSON.
  (func (export "filter") (param $req i32) (param $len i32) (result i64)
    (call $answer (i32.const 256) (i32.const 8)))
