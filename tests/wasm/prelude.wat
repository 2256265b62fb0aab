;; What every test plugin module shares (tests/wasm/README.md): the ABI's memory and
;; bump allocator, a substring search, an answer writer, and the strings the plugins answer
;; with. Not a module by itself: each plugin's file is spliced in after it, inside `(module …)`.
  (memory (export "memory") 1)
  (data (i32.const 0) "{\"decision\":\"approve\"}") ;; 22 bytes
  (data (i32.const 32) "{\"decision\":\"modify\",\"request\":{") ;; 32 bytes
  (data (i32.const 64) "]}}") ;; 3 bytes
  (data (i32.const 68) ",") ;; 1 bytes
  (data (i32.const 72) "\"project_id\":\"tenant-x\"") ;; 23 bytes
  (data (i32.const 96) "\"forbidden_traits\":[") ;; 20 bytes
  (data (i32.const 128) "\"CUSTOM_MAINTENANCE\"") ;; 20 bytes
  (data (i32.const 160) "\"flavor\":{") ;; 10 bytes
  (data (i32.const 176) "\"name\":\"gpu.") ;; 12 bytes
  (data (i32.const 192) "\"required_traits\":[") ;; 19 bytes
  (data (i32.const 224) "\"CUSTOM_GPU_FAMILY\"") ;; 19 bytes
  (data (i32.const 256) "not json") ;; 8 bytes
  (data (i32.const 288) "{}") ;; 2 bytes
  ;; Allocations start past the strings and are never freed: each call starts from the instance
  ;; as instantiated (docs/plugins.md §8), $heap at 4096 again.
  (global $heap (mut i32) (i32.const 4096))

  (func $alloc (export "alloc") (param $len i32) (result i32)
    (local $p i32) (local $end i32) (local $have i32)
    (local.set $p (global.get $heap))
    (local.set $end (i32.add (local.get $p) (local.get $len)))
    (local.set $have (i32.mul (memory.size) (i32.const 65536)))
    (if (i32.gt_u (local.get $end) (local.get $have))
      (then
        (if (i32.lt_s
              (memory.grow (i32.shr_u
                (i32.add (i32.sub (local.get $end) (local.get $have)) (i32.const 65535))
                (i32.const 16)))
              (i32.const 0))
          (then unreachable))))
    (global.set $heap (local.get $end))
    (local.get $p))

  ;; Where [$n, $n + $nlen) first occurs in [$h, $h + $hlen), as an offset from $h; -1: nowhere.
  (func $find (param $h i32) (param $hlen i32) (param $n i32) (param $nlen i32) (result i32)
    (local $i i32) (local $j i32) (local $last i32)
    (if (i32.gt_u (local.get $nlen) (local.get $hlen)) (then (return (i32.const -1))))
    (local.set $last (i32.sub (local.get $hlen) (local.get $nlen)))
    (block $none
      (loop $outer
        (br_if $none (i32.gt_u (local.get $i) (local.get $last)))
        (local.set $j (i32.const 0))
        (block $miss
          (loop $inner
            (if (i32.eq (local.get $j) (local.get $nlen)) (then (return (local.get $i))))
            (br_if $miss
              (i32.ne
                (i32.load8_u (i32.add (local.get $h) (i32.add (local.get $i) (local.get $j))))
                (i32.load8_u (i32.add (local.get $n) (local.get $j)))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br $inner)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $outer)))
    (i32.const -1))

  ;; Appends [$src, $src + $len) to the heap.
  (func $emit (param $src i32) (param $len i32)
    (memory.copy (call $alloc (local.get $len)) (local.get $src) (local.get $len)))

  ;; The ABI's answer: $ptr << 32 | $len.
  (func $answer (param $ptr i32) (param $len i32) (result i64)
    (i64.or
      (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32))
      (i64.extend_i32_u (local.get $len))))

  (func $approve (result i64)
    (call $answer (i32.const 0) (i32.const 22)))

  ;; A `select` answer adding the item [$item, $item + $ilen) to the request's list whose key
  ;; (with its opening bracket) is [$key, $key + $klen): the list as it was, plus the item.
  (func $modify_adding (param $req i32) (param $len i32) (param $key i32) (param $klen i32)
                       (param $item i32) (param $ilen i32) (result i64)
    (local $at i32) (local $start i32) (local $end i32) (local $out i32)
    (local.set $at (call $find (local.get $req) (local.get $len) (local.get $key) (local.get $klen)))
    (if (i32.lt_s (local.get $at) (i32.const 0)) (then (return (call $approve))))
    (local.set $start (i32.add (i32.add (local.get $req) (local.get $at)) (local.get $klen)))
    (local.set $end (local.get $start))
    (block $closed
      (loop $scan
        (br_if $closed (i32.eq (i32.load8_u (local.get $end)) (i32.const 93))) ;; ']'
        (local.set $end (i32.add (local.get $end) (i32.const 1)))
        (br $scan)))
    (local.set $out (global.get $heap))
    (call $emit (i32.const 32) (i32.const 32))
    (call $emit (local.get $key) (local.get $klen))
    (call $emit (local.get $start) (i32.sub (local.get $end) (local.get $start)))
    (if (i32.gt_u (local.get $end) (local.get $start))
      (then (call $emit (i32.const 68) (i32.const 1))))
    (call $emit (local.get $item) (local.get $ilen))
    (call $emit (i32.const 64) (i32.const 3))
    (call $answer (local.get $out) (i32.sub (global.get $heap) (local.get $out))))
