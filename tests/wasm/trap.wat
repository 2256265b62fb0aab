;; A filter that traps at once.
  (func (export "filter") (param $req i32) (param $len i32) (result i64)
    unreachable)
