;; Issue 47's second example: a flavor of the `gpu.` family needs CUSTOM_GPU_FAMILY (added to
;; the required traits); every other flavor is approved. The flavor's name is the first
;; `"name"` after `"flavor":{`.
  (func (export "select") (param $req i32) (param $len i32) (result i64)
    (local $flavor i32) (local $name i32)
    (local.set $flavor (call $find (local.get $req) (local.get $len) (i32.const 160) (i32.const 10)))
    (if (i32.lt_s (local.get $flavor) (i32.const 0)) (then (return (call $approve))))
    (local.set $name
      (call $find (i32.add (local.get $req) (local.get $flavor))
                  (i32.sub (local.get $len) (local.get $flavor))
                  (i32.const 176) (i32.const 8)))
    ;; `"name":"` found: is it followed by `gpu.`?
    (if (i32.lt_s (local.get $name) (i32.const 0)) (then (return (call $approve))))
    (if (i32.ne
          (call $find (i32.add (i32.add (local.get $req) (local.get $flavor)) (local.get $name))
                      (i32.const 12) (i32.const 176) (i32.const 12))
          (i32.const 0))
      (then (return (call $approve))))
    (call $modify_adding (local.get $req) (local.get $len)
      (i32.const 192) (i32.const 19) (i32.const 224) (i32.const 19)))
