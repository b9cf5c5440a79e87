#!/bin/sh
# build-test-image.sh: build a tiny OCI image tarball from Debian's
# busybox-static, without network or container tools, for container-job
# tests and demos:
#
#   scripts/build-test-image.sh [OUT.tar [NAME]]
#   tide image import OUT.tar        # on each node, as root
#   sbatch --container-image=NAME job.sh
#
# OUT defaults to tide-test-bb.tar, NAME to docker.io/tide-test/bb:latest
# (what --container-image=tide-test/bb means). The image holds
# /bin/busybox with a link per applet (sh, sleep, id, cat...), an
# /etc/passwd and /etc/group with root and nobody, and a sticky /tmp. The
# tarball is an OCI image layout whose index names the image with the
# io.containerd.image.name annotation, so "containerd import" (and
# "tide image import") knows what to call it. The same input gives the
# same bytes: timestamps, owners and file order are fixed.
set -eu

out=${1:-tide-test-bb.tar}
name=${2:-docker.io/tide-test/bb:latest}
bb=${BUSYBOX:-/bin/busybox}
[ -x "$bb" ] || bb=/usr/bin/busybox
if [ ! -x "$bb" ] || ! "$bb" --list >/dev/null 2>&1; then
	echo "build-test-image.sh: busybox not found; install busybox-static (apt-get install busybox-static)" >&2
	exit 1
fi
if ldd "$bb" >/dev/null 2>&1; then
	echo "build-test-image.sh: $bb is dynamically linked; install busybox-static" >&2
	exit 1
fi
case $(uname -m) in
x86_64) arch=amd64 ;;
aarch64) arch=arm64 ;;
*) arch=$(uname -m) ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/root" "$root/home"
cp "$bb" "$root/bin/busybox"
for a in $("$bb" --list); do
	[ "$a" = busybox ] || ln -s busybox "$root/bin/$a"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
chmod 1777 "$root/tmp"

blobs=$work/layout/blobs/sha256
mkdir -p "$blobs"
sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { wc -c <"$1" | tr -d ' '; }
# put FILE: store FILE as a blob, print its digest.
put() { d=$(sha "$1"); cp "$1" "$blobs/$d"; echo "$d"; }

tar -C "$root" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$work/layer.tar" .
diffid=$(sha "$work/layer.tar")
gzip -n -9 <"$work/layer.tar" >"$work/layer.tar.gz"
layer=$(put "$work/layer.tar.gz")
layer_size=$(size "$work/layer.tar.gz")

printf '{"architecture":"%s","os":"linux","config":{"Env":["PATH=/usr/local/bin:/usr/bin:/bin"],"Cmd":["/bin/sh"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created_by":"scripts/build-test-image.sh"}]}' \
	"$arch" "$diffid" >"$work/config.json"
config=$(put "$work/config.json")
config_size=$(size "$work/config.json")

printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
	"$config" "$config_size" "$layer" "$layer_size" >"$work/manifest.json"
manifest=$(put "$work/manifest.json")
manifest_size=$(size "$work/manifest.json")

printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
	"$manifest" "$manifest_size" "$arch" "$name" "${name##*:}" >"$work/layout/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$work/layout/oci-layout"

tar -C "$work/layout" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$out.tmp" .
mv "$out.tmp" "$out"
echo "wrote $out: $name ($arch, sha256:$manifest)"
