package nvinit

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/poold"
)

// TestSupervisorThroughPoold: a service with Pool set is started by poold
// (here a prepared child that execs /bin/sh), its output reaches the
// console and its exit status the supervisor.
func TestSupervisorThroughPoold(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	self, _ := os.Executable()
	sock := filepath.Join(t.TempDir(), "poold.sock")
	srv, stop, err := poold.Start(&contract.PooldConfig{Socket: sock, Programs: []contract.Program{
		{Name: "sh", Path: "/bin/sh", Exec: true, MinIdle: 1, Allow: []string{"*"}}}},
		poold.Options{Self: self, NoTicker: true})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	srv.Fill()
	s := &supervisor{PoolSocket: sock, Poweroff: true, Services: []contract.Service{{Name: "p", Path: "/bin/sh",
		Args: []string{"-c", "echo pooled $FOO; exit 3"}, Env: []string{"FOO=bar"}, Pool: "sh", Restart: contract.RestartNever}}}
	out, _, done := harness(t, s)
	out.expect(t, "p: pooled bar")
	out.expect(t, "nvinit: p exited with status 3")
	if err := <-done; err != errAllExited {
		t.Fatalf("Run: %v", err)
	}
	if st := srv.Stats().Programs[0]; st.Hits != 1 {
		t.Fatalf("poold served %+v, want one hit", st)
	}
}
