package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/bench/exec/plan"
	"github.com/nvboot/nvboot/off2f"
)

// Layout names. The host has no pmem, so its OFF2F text store is on tmpfs and
// says so in its name.
const (
	layoutELF        = "elf"              // the plain ELF on storage
	layoutOFF2F      = "off2f"            // header on storage, text in the store on DAX pmem (VM)
	layoutOFF2FTmpfs = "off2f-tmpfs-text" // header on storage, text in a store on tmpfs (host)
	// Header on storage, text in a store on a tmpfs mounted huge=always (host):
	// 2 MiB pages, like DAX on pmem can map the text, where plain tmpfs has 4 KiB.
	layoutOFF2FHuge = "off2f-hugetmpfs-text"
	layoutDAXELF    = "dax-elf"   // the whole ELF on the DAX filesystem (VM)
	layoutTmpfs     = "tmpfs"     // the ELF on tmpfs
	layoutHugeTmpfs = "hugetmpfs" // the ELF on a tmpfs mounted huge=always (host)
)

// layout is one way of laying out the programs: a directory (as the measurer
// sees it) that holds big, mid and tiny as ELF files or OFF2F header files.
type layout struct {
	Name string
	Dir  string
}

// placeELFs copies the original programs into dir.
func placeELFs(p *programs, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range programNames {
		if err := copyFile(filepath.Join(dir, name), p.Bins[name]); err != nil {
			return err
		}
	}
	return nil
}

// placeOFF2F converts the programs: header files into dir, text files into the
// store directory storeDir (written now), recorded for run time as
// opt.StoreDir with opt.Loader as interpreter.
func placeOFF2F(p *programs, dir, storeDir string, opt off2f.Options) error {
	for _, d := range []string{dir, storeDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, name := range programNames {
		raw, err := os.ReadFile(p.Bins[name])
		if err != nil {
			return err
		}
		if _, _, err := off2f.Install(raw, opt, filepath.Join(dir, name), storeDir); err != nil {
			return fmt.Errorf("installing %s as OFF2F: %w", name, err)
		}
	}
	return nil
}

// makeScript is the make-like workload: a shell loop that starts tiny and mid
// iters times each from one layout's directory, like a build starting
// compilers and tools over and over. set -e: a failed start fails the run.
func makeScript(dir string, iters int) string {
	return fmt.Sprintf(`set -e
i=0
while [ $i -lt %d ]; do
	%s/tiny >/dev/null
	%s/mid >/dev/null
	i=$((i+1))
done
echo "make: %d starts"
`, iters, dir, dir, 2*iters)
}

// writeScripts writes make-<layout>.sh for every layout into dir (as the host
// sees it) and returns the argv of each, with scriptDir being dir as the
// measurer sees it.
func writeScripts(dir, scriptDir, shell string, layouts []layout, iters int) (map[string][]string, error) {
	argv := map[string][]string{}
	for _, l := range layouts {
		name := "make-" + l.Name + ".sh"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(makeScript(l.Dir, iters)), 0o644); err != nil {
			return nil, err
		}
		argv[l.Name] = []string{shell, filepath.Join(scriptDir, name)}
	}
	return argv, nil
}

// makePlan lays out the groups: for each program cold then warm, then the
// make-like loop cold; every group round-robin over the layouts.
func makePlan(layouts []layout, k counts, scripts map[string][]string, devStat string) plan.Plan {
	p := plan.Plan{DevStat: devStat}
	cases := func(prog string) []plan.Case {
		var cs []plan.Case
		for _, l := range layouts {
			cs = append(cs, plan.Case{Layout: l.Name, Argv: []string{filepath.Join(l.Dir, prog)}})
		}
		return cs
	}
	for _, prog := range programNames {
		warm := k.Warm
		if prog == "tiny" {
			warm = k.TinyWarm
		}
		p.Groups = append(p.Groups,
			plan.Group{Name: prog + "/cold", Cold: true, Runs: k.Cold, Cases: cases(prog)},
			plan.Group{Name: prog + "/warm", Runs: warm, Cases: cases(prog)})
	}
	var mk []plan.Case
	for _, l := range layouts {
		mk = append(mk, plan.Case{Layout: l.Name, Argv: scripts[l.Name]})
	}
	p.Groups = append(p.Groups, plan.Group{Name: "make/cold", Cold: true, Runs: k.Make, Cases: mk})
	return p
}

func layoutNames(ls []layout) string {
	var s []string
	for _, l := range ls {
		s = append(s, l.Name+"="+l.Dir)
	}
	return strings.Join(s, " ")
}
