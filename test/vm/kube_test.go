//go:build vmtest

package vm

// The shipped pod spec, deploy/kubernetes/tend.yaml, run by `podman kube
// play` as a kubelet would run it: only its image is pointed at the local
// build. deploy/kubernetes/README.md lists what podman does not honour.

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	shippedImage = "ghcr.io/example/agents-with-tend:latest" // the manifest's placeholder
	kubeGrace    = 100 * time.Second                         // its terminationGracePeriodSeconds
)

func TestKubePlayShippedManifest(t *testing.T) {
	tendImage(t)
	b, err := os.ReadFile(filepath.Join(payloadDir, "tend.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte(shippedImage)); n != 1 {
		t.Fatalf("deploy/kubernetes/tend.yaml names %s %d times, want once", shippedImage, n)
	}
	// Podman publishes each containerPort on the host's own port and plays
	// replicas as that many pods on this one host, so a second replica's
	// :7070 collides with the first's; a cluster gives each pod its own
	// address (deploy/kubernetes/README.md). One replica here.
	if n := bytes.Count(b, []byte("replicas: 3\n")); n != 1 {
		t.Fatalf("deploy/kubernetes/tend.yaml has \"replicas: 3\" %d times, want once", n)
	}
	b = bytes.Replace(b, []byte("replicas: 3\n"), []byte("replicas: 1\n"), 1)
	// Podman 4.3 mounts a secret volume's whole directory and ignores
	// subPath, so state_dir/token would be a directory, which tend refuses
	// ("is not a regular file"); a kubelet bind-mounts the one file. The
	// token's mount goes here, and tend makes a token of its own.
	tokenMount := "            - {name: token, mountPath: /var/lib/tend/token, subPath: token}\n"
	if n := bytes.Count(b, []byte(tokenMount)); n != 1 {
		t.Fatalf("deploy/kubernetes/tend.yaml has the token's mount %d times, want once", n)
	}
	b = bytes.Replace(b, []byte(tokenMount), nil, 1)
	manifest := filepath.Join(t.TempDir(), "tend.yaml")
	if err := os.WriteFile(manifest, bytes.Replace(b, []byte(shippedImage), []byte(image), 1), 0o644); err != nil {
		t.Fatal(err)
	}

	// The Secret the manifest's comment says to create once. Podman 4.3
	// reads a secret volume's podman secret as a Kubernetes Secret object,
	// so that is what it holds (what kubectl create secret would make).
	token := strings.Repeat("5e", 32)
	tokenFile := filepath.Join(t.TempDir(), "secret.yaml")
	secret := "apiVersion: v1\nkind: Secret\nmetadata: {name: agents-tend-token}\ndata:\n  token: " +
		base64.StdEncoding.EncodeToString([]byte(token)) + "\n"
	if err := os.WriteFile(tokenFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _ = run("podman", "secret", "rm", "agents-tend-token")
	podman(t, "secret", "create", "agents-tend-token", tokenFile)
	t.Cleanup(func() { _, _ = run("podman", "secret", "rm", "agents-tend-token") })

	_, _ = run("podman", "kube", "down", manifest)
	out := podman(t, "kube", "play", manifest)
	t.Logf("podman kube play:\n%s", out)
	down := false
	t.Cleanup(func() {
		if down {
			return
		}
		if t.Failed() {
			out, _ := run("podman", "pod", "ps")
			t.Logf("podman pod ps:\n%s", out)
		}
		_, _ = run("podman", "kube", "down", manifest)
	})
	name := podContainer(t)
	c := &container{name: name}
	t.Cleanup(func() {
		if t.Failed() && !down {
			out, _ := run("podman", "logs", name)
			t.Logf("podman logs %s:\n%s", name, tail(out, 60))
		}
	})

	// The pod as the manifest says: tend up as PID 1, its config the
	// ConfigMap's, the token the Secret's.
	if cmd := c.exec(t, "cat", "/proc/1/cmdline"); cmd != "/usr/local/bin/tend\x00up\x00-c\x00/etc/tend/tend.toml\x00" {
		t.Errorf("PID 1 of the pod's container is %q, want tend up -c /etc/tend/tend.toml", cmd)
	}
	if conf := c.exec(t, "cat", "/etc/tend/tend.toml"); !strings.Contains(conf, "[program.planner]") ||
		!strings.Contains(conf, `http = "0.0.0.0:7070"`) {
		t.Errorf("/etc/tend/tend.toml in the pod is not the ConfigMap's:\n%s", conf)
	}
	if got := c.exec(t, "cat", "/var/lib/tend/token"); len(got) < 32 || got == token {
		t.Errorf("/var/lib/tend/token = %q, want one tend made", got)
	}

	// The probes, as the kubelet sends them: to the pod's address.
	addr := ip(t, infraOf(t, name))
	waitProbe(t, addr, "/healthz", 200)
	for i := range 4 {
		c.waitRunning(t, "worker:"+string(rune('0'+i)))
	}
	if code, body := probe(addr, "/readyz"); code != 503 {
		t.Errorf("GET /readyz before the planner's READY=1 = %d %s, want 503", code, body)
	} else {
		t.Logf("GET /readyz before the planner's READY=1: 503 %s", body)
	}
	c.exec(t, "touch", "/tmp/planner-go")
	waitProbe(t, addr, "/readyz", 200)
	if code, _ := probe(addr, "/healthz"); code != 200 {
		t.Errorf("GET /healthz = %d, want 200", code)
	}
	// The livenessProbe as podman runs it (curl in the container, every
	// periodSeconds; three failures and podman restarts the container).
	if h := healthcheck(name); !strings.HasPrefix(h, "healthy") {
		t.Errorf("podman healthcheck run (the livenessProbe): %s", h)
	}
	if n := inspect(t, name, "{{.RestartCount}}"); n != "0" {
		t.Errorf("the pod's tend container restarted %s times, want 0", n)
	}

	// kubectl logs: forward_output.
	logs := podman(t, "logs", name)
	for _, want := range []string{"worker:0 | worker worker:0 up on queue default", "planner:0 | planner planner:0 ready"} {
		if !strings.Contains(logs, want) {
			t.Errorf("podman logs has no %q:\n%s", want, tail(logs, 30))
		}
	}

	// Deleting the pod: as a kubelet does, SIGTERM and the manifest's
	// terminationGracePeriodSeconds before SIGKILL (podman pod stop -t);
	// tend drains its fleet well within it and exits 0. podman kube down
	// then removes the pod. (Podman 4.3's kube down alone SIGKILLs at once,
	// and its containers' stop timeout is its own 10s, not the manifest's
	// grace: deploy/kubernetes/README.md.)
	pod := inspect(t, name, "{{.Pod}}")
	start := time.Now()
	podman(t, "pod", "stop", "-t", strconv.Itoa(int(kubeGrace/time.Second)), pod)
	took := time.Since(start)
	t.Logf("podman pod stop -t %d took %v", int(kubeGrace/time.Second), took.Round(100*time.Millisecond))
	if took >= kubeGrace {
		t.Errorf("podman pod stop took %v, over terminationGracePeriodSeconds (%v)", took, kubeGrace)
	}
	if code := inspect(t, name, "{{.State.ExitCode}}"); code != "0" {
		t.Errorf("tend's exit status after the pod's stop = %s, want 0", code)
	}
	logs = podman(t, "logs", name)
	for _, want := range []string{"daemon phase=stopping", "worker:3 exited signal=SIGTERM cause=operator_stop", "planner:0 exited signal=SIGTERM cause=operator_stop", "daemon phase=stopped"} {
		if !strings.Contains(logs, want) {
			t.Errorf("tend's output has no %q:\n%s", want, tail(logs, 20))
		}
	}
	start = time.Now()
	podman(t, "kube", "down", manifest)
	down = true
	t.Logf("podman kube down took %v", time.Since(start).Round(100*time.Millisecond))
}

// podContainer is the name of the pod's tend container (podman names it
// POD-CONTAINER), once it runs.
func podContainer(t *testing.T) string {
	t.Helper()
	var name string
	waitFor(t, 2*time.Minute, "the pod's tend container running", func() (bool, string) {
		out := podman(t, "ps", "-a", "--format", "{{.Names}}")
		for _, n := range strings.Fields(out) {
			if strings.HasSuffix(n, "-tend") {
				name = n
				st := inspect(t, n, "{{.State.Status}}")
				return st == "running", n + " " + st
			}
		}
		return false, out
	})
	return name
}

// infraOf is the pod's infra container: it holds the pod's network.
func infraOf(t *testing.T, name string) string {
	t.Helper()
	pod := inspect(t, name, "{{.Pod}}")
	return podman(t, "pod", "inspect", "--format", "{{.InfraContainerID}}", pod)
}

// healthcheck runs the container's healthcheck once: podman's form of the
// livenessProbe.
func healthcheck(name string) string {
	out, err := run("podman", "healthcheck", "run", name)
	if err != nil {
		return "failed: " + err.Error() + ": " + strings.TrimSpace(out)
	}
	return "healthy " + strings.TrimSpace(out)
}
