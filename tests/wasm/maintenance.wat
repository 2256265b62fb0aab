;; Issue 47's first example: tenant `tenant-x` is kept off hosts in maintenance — its calls
;; get CUSTOM_MAINTENANCE added to their forbidden traits; every other call is approved.
  (func (export "select") (param $req i32) (param $len i32) (result i64)
    (if (i32.lt_s (call $find (local.get $req) (local.get $len) (i32.const 72) (i32.const 23))
                  (i32.const 0))
      (then (return (call $approve))))
    (call $modify_adding (local.get $req) (local.get $len)
      (i32.const 96) (i32.const 20) (i32.const 128) (i32.const 20)))
