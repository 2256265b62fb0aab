;; The benchmark's filter: reads the whole request looking for a candidate in maintenance
;; (CUSTOM_MAINTENANCE among its traits) and, finding none, keeps every candidate (`{}`).
;; A real rule would name what it removes; the cost measured is reading the request.
  (func (export "filter") (param $req i32) (param $len i32) (result i64)
    (drop (call $find (local.get $req) (local.get $len) (i32.const 128) (i32.const 20)))
    (call $answer (i32.const 288) (i32.const 2)))
