#!/usr/bin/env python3
"""The Kubernetes manifests of deploy/kubernetes/ run by `podman kube play` with the image that
scripts/build_image.sh builds. podman (4.3, Debian 12's) plays Pods, Deployments, volume claims
and ConfigMaps, not Jobs: what a Job adds to its pod template is done here as the Job controller
would do it. Each completion index of mira-shards.yaml becomes a Pod of the Job's own pod spec
(command, environment, securityContext, volume) with JOB_COMPLETION_INDEX set, the image put in
place of the placeholder and the claim named after a podman volume made for the test; then the
merge Job's pod spec, the same way. The merged run must hold the cases and verdicts of a single
run in the image.
  kube_play_test.py IMAGE
Exits 77 (skipped) when not root, without podman or PyYAML, or when IMAGE has not been built."""
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def skip(why):
    print(f"mira test skipped: {why}")
    sys.exit(77)


def podman(*args, check=True):
    r = subprocess.run(["podman", *args], capture_output=True, text=True, check=False)
    if check and r.returncode != 0:
        raise SystemExit(f"podman {' '.join(args)}: exit {r.returncode}\n{r.stderr}")
    return r


def pod_of(job, name, image, claim, index=None):
    """The Pod that a Job's controller would create from its template."""
    spec = copy.deepcopy(job["spec"]["template"]["spec"])
    for container in spec["containers"]:
        container["image"] = image
        if index is not None:
            container.setdefault("env", []).append({"name": "JOB_COMPLETION_INDEX", "value": str(index)})
    for volume in spec.get("volumes", []):
        if "persistentVolumeClaim" in volume:
            volume["persistentVolumeClaim"]["claimName"] = claim
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def play(yaml, documents, folder, stem):
    """Plays the Pods, waits for each one's containers, returns their exit codes by name."""
    path = os.path.join(folder, f"{stem}.yaml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump_all(documents, f)
    podman("kube", "play", path)
    codes = {}
    for doc in documents:
        for container in doc["spec"]["containers"]:
            name = f"{doc['metadata']['name']}-{container['name']}"
            code = int(podman("wait", name).stdout.strip())
            if code != 0:
                print(podman("logs", name, check=False).stderr[-2000:])
            codes[name] = code
    podman("kube", "down", path, check=False)
    return codes


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: kube_play_test.py IMAGE")
    image = sys.argv[1]
    if os.geteuid() != 0:
        skip("needs root (podman)")
    if shutil.which("podman") is None:
        skip("podman is not installed")
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError:
        skip("PyYAML (python3-yaml) is not installed")
    if podman("image", "exists", image, check=False).returncode != 0:
        skip(f"no image {image} (scripts/build_image.sh builds it)")
    env = subprocess.run(["bash", "-c", f'. "{REPO}/scripts/podman_env.sh" && podman_env_setup "{image}" '
                          '&& echo "${CONTAINERS_CONF:-}"'], capture_output=True, text=True, check=False)
    if env.returncode != 0:
        sys.exit(env.stderr)
    if env.stdout.strip():
        os.environ["CONTAINERS_CONF"] = env.stdout.strip()

    def manifest(name):
        with open(os.path.join(REPO, "deploy", "kubernetes", name), encoding="utf-8") as f:
            return yaml.safe_load(f)

    shards, merge = manifest("mira-shards.yaml"), manifest("mira-merge.yaml")
    said = podman("kube", "play", os.path.join(REPO, "deploy", "kubernetes", "mira-shards.yaml"), check=False)
    if said.returncode != 0:
        print(f"podman kube play of the Job itself: {said.stderr.strip()} (so its pods are played)")
    suffix = str(os.getpid())
    claim = f"mira-results-{suffix}"
    podman("volume", "create", claim)
    folder = tempfile.mkdtemp()
    try:
        mountpoint = podman("volume", "inspect", "--format", "{{.Mountpoint}}", claim).stdout.strip()
        count = shards["spec"]["completions"]
        pods = [pod_of(shards, f"mira-shard-{i}-{suffix}", image, claim, i) for i in range(count)]
        codes = play(yaml, pods, folder, "shards")
        assert all(c == 0 for c in codes.values()), f"shard pods: {codes}"
        codes = play(yaml, [pod_of(merge, f"mira-merge-{suffix}", image, claim)], folder, "merge")
        assert all(c == 0 for c in codes.values()), f"merge pod: {codes}"
        run_id = next(e["value"] for e in merge["spec"]["template"]["spec"]["containers"][0]["env"]
                      if e["name"] == "MIRA_RUN_ID")
        merged = os.path.join(mountpoint, run_id)
        with open(os.path.join(merged, "meta.json"), encoding="utf-8") as f:
            meta = json.load(f)
        assert [s["index"] for s in meta["merged"]["shards"]] == list(range(count)), meta["merged"]
        single = podman("run", "--rm", "-v", f"{claim}:/results", image, "run", "--results-dir",
                        "/results/single", "--run-id", "single", "--progress", "none", "--", "/opt/study/example_study",
                        check=False)
        assert single.returncode in (0, 1), f"single run: exit {single.returncode}\n{single.stderr}"
        same = subprocess.run([sys.executable, os.path.join(HERE, "same_cases.py"), merged,
                               os.path.join(mountpoint, "single", "single")], check=False)
        if same.returncode == 0:
            print(f"{count} shard pods and the merge pod, played by podman from deploy/kubernetes/ with {image}")
        return same.returncode
    finally:
        podman("volume", "rm", "-f", claim, check=False)
        shutil.rmtree(folder, ignore_errors=True)
        if os.environ.get("CONTAINERS_CONF"):
            os.unlink(os.environ["CONTAINERS_CONF"])


if __name__ == "__main__":
    sys.exit(main())
