"""Hash the SASS of every shuffle_cols (CT = BLOCK) and planned tc_cols instantiation, sm_90 and sm_80."""
import hashlib, json, subprocess, sys, tempfile, os
from concurrent.futures import ProcessPoolExecutor
sys.path.insert(0, "tests")
NVD = "/tmp/nvd/ext/nvidia/cu13/bin/nvdisasm"

def names():
    from tcreduce.plans import shuffle as sh
    from tcreduce._api import get_plan
    from tcreduce._device import KNOWN_GPUS
    import test_compile as tcmp
    fmts = ("float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2")
    outs = ("float32", "float64", "float16")
    out = set()
    for f in fmts:
        for o in outs:
            out |= {("shuffle.cu", x) for x in sh.kernel_names(f, o)
                    if x.startswith("shuffle_cols<") and x.split(", ")[4] == "256"}
    for dev in KNOWN_GPUS.values():
        for prob in tcmp.PROBLEMS:
            for m in ("tensorcore", "tensorcore_chained"):
                for f in fmts:
                    for o in outs:
                        try:
                            p = get_plan(m, prob, f, o, dev)
                        except Exception:
                            continue
                        for l in p.launches:
                            if "tc_cols<" in l.kernel:
                                src, _, k = l.kernel.partition(":") if ":" in l.kernel else (l.source, "", l.kernel)
                                out.add((l.source if hasattr(l, "source") else "tensorcore.cu", l.kernel.split(":")[-1]))
    return sorted(out)

def one(item):
    src, name = item
    from tcreduce._compile import compile_kernel
    res = {}
    for arch in tuple(os.environ.get("ARCHS", "sm_90").split(",")):
        try:
            ck = compile_kernel(src, name, arch, use_cache=False)
        except Exception as e:
            res[arch] = "ERR " + str(e)[:100]; continue
        cubin = ck.cubin if hasattr(ck, "cubin") else ck[0]
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as fh:
            fh.write(bytes(cubin)); path = fh.name
        sass = subprocess.run([NVD, "-c", path], capture_output=True, text=True).stdout
        os.unlink(path)
        res[arch] = hashlib.sha1(sass.encode()).hexdigest()
    return f"{src}:{name}", res

if __name__ == "__main__":
    items = names()
    print(len(items), file=sys.stderr)
    with ProcessPoolExecutor(2) as ex:
        out = dict(ex.map(one, items))
    json.dump(out, open(sys.argv[1], "w"), indent=0, sort_keys=True)
