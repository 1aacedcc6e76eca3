package pull

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/internal/atomicfile"
)

// stateFile is nvpull's memory in its directory, across restarts and
// boots; the status (contract.PullStatusFile) is the part the endpoint
// serves.
const stateFile = "state.json"

// state is what nvpull keeps.
type state struct {
	Status contract.PullStatus
	// Root names the booted root Status.Running was recorded on
	// (rootID): another root (a flashed card, an A/B update that nvpull
	// did not make) makes Running unknown again.
	Root string
	// Services are the programs nvpull deployed, by service: the header
	// file's digest (a layer's) and the program the deploy answered, so
	// a service whose link still names that program runs that header.
	Services map[string]deployed `json:",omitempty"`
	// AB is an A/B update written and test-booted; nil: none.
	AB *abTry `json:",omitempty"`
	// TestBoots counts the test boots of one image that did not come up,
	// so a power cut in one is not taken for the image's failure at once.
	TestBoots *failedTestBoots `json:",omitempty"`
}

// failedTestBoots is how many test boots of the image Digest ended back
// on the old slot.
type failedTestBoots struct {
	Digest string
	Failed int
}

// maxTestBoots is how many test boots an A/B image gets before it is
// refused: back on the old slot nvpull cannot tell a failed test boot
// from a power cut during one, so a cut costs a retry, not the update,
// and an image that never comes up costs three test boots.
const maxTestBoots = 3

type deployed struct{ Header, Program string }

// abTry is an A/B update whose test boot was asked for.
type abTry struct {
	Digest, Version string
	ImageID         string // the new image's id: what its root says it is
}

// load reads the state; none (a first run) is an empty one, and so is one
// that does not parse, said.
func (p *Puller) load() {
	p.st = state{}
	b, err := os.ReadFile(filepath.Join(p.Dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		err = json.Unmarshal(b, &p.st)
	}
	if err != nil {
		p.logf("state %s: %v; starting afresh", filepath.Join(p.Dir, stateFile), err)
		p.st = state{}
	}
}

// save writes the state and the status, each atomically: the status last,
// so what the endpoint serves is never ahead of what nvpull remembers.
func (p *Puller) save() error {
	s := &p.st.Status
	s.Repository, s.Tag = p.Pull.Repository, p.Pull.Tag
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(&p.st, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(p.Dir, stateFile), b, 0o600); err != nil {
		return stateError(err)
	}
	b, err = json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return stateError(atomicfile.WriteFile(filepath.Join(p.Dir, contract.PullStatusFile), b, 0o644))
}

// saveOrLog saves, saying on the console when it cannot.
func (p *Puller) saveOrLog() {
	if err := p.save(); err != nil {
		p.logf("keeping the state: %v", err)
	}
}

// rootID names the booted root by what tells images apart: its base, its
// version, its image id and its text MANIFEST (every program's text).
func (p *Puller) rootID() string {
	h := sha256.New()
	for _, f := range []string{contract.BasePath, contract.VersionPath, contract.ImageIDPath, contract.Manifest} {
		b, err := os.ReadFile(p.path(f))
		fmt.Fprintf(h, "%s %d %v\n", f, len(b), err == nil)
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}
