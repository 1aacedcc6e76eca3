package nvbootcmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/host/image/appliance"
	"github.com/nvboot/nvboot/host/image/config"
	"github.com/nvboot/nvboot/host/publish"
	"github.com/nvboot/nvboot/internal/cli"
)

const pushDescription = `Builds the image of a config (the off2f layout, as nvboot build does; a
Raspberry Pi's the elf layout, its programs whole) and
publishes it to an OCI registry (CNCF Distribution, Harbor, Zot, GHCR,
ECR...) as one signed artifact, for appliances to pull:

  - one image manifest (artifactType application/vnd.nvboot.image.v1)
    whose config is image.json and whose layers are the image's parts,
    each a blob of its own: every OFF2F text (its blob's digest is the
    text's name in the text store), every program's header file (a Pi's
    whole program), the root filesystem, the boot partitions (or EFI
    system partition), the kernel (a Pi's is in its boot partitions);
    annotated with the version (the config's Version, or -version), the
    target (amd64-pc, arm64-virt, arm64-rpi) and the image's base;
  - a blob the registry holds already is not sent again: after a change
    of one service, a push sends its header file and text, image.json and
    the root filesystem, and skips the rest;
  - an ed25519 signature of the manifest's digest, pushed as an OCI 1.1
    referrer of the manifest (the registry's referrers API, or the
    fallback tag sha256-<hex>); the tag moves to the new manifest last.

The signing key is kept beside the config (update-signing/image-key.pem;
-key FILE for another). The first push makes it and says so: appliances
check pulled images with its public half, which every image built from
the config from then on carries (/etc/nvboot/image-key.pem; nvboot build
puts it in too). Keep the key: an appliance trusts no other.

The registry is reached over HTTPS, trusting the system's CAs and -ca
FILE. Credentials: -user NAME with the password on stdin
(-password-stdin), else the Docker config file's for the registry
($DOCKER_CONFIG/config.json or ~/.docker/config.json: auths, credsStore,
credHelpers), as docker login leaves them. -insecure talks plain HTTP,
with a warning, credentials and image in the clear: for a registry on
loopback only.

docs/UPDATE.md#the-oci-artifact describes the artifact. With -json the
result is one JSON object on stdout (Reference, Digest, Version, Target,
Signature, KeyID, Blobs, Pushed, Skipped, Bytes, BytesPushed,
PushedBlobs); progress goes to stderr.`

const pushExamples = `  nvboot push -config appliance.json registry.example.com/fleet/kv:stable
  nvboot push -config appliance.json -version 1.4.2 registry.example.com/fleet/kv:1.4.2
  echo "$TOKEN" | nvboot push -config appliance.json -user ci -password-stdin ghcr.io/me/kv:stable
  nvboot push -config appliance.json -ca registry-ca.pem 10.0.0.5:5000/kv:stable
  nvboot push -config appliance.json -insecure 127.0.0.1:5000/kv:dev      # plain HTTP
  nvboot push -json -config appliance.json registry.example.com/fleet/kv:stable | jq .Pushed`

func pushCmd(ctx context.Context, c *cli.Context) error {
	fs := cli.FlagSet(c, "nvboot push", "nvboot push -config FILE [-key FILE] [-version V] [-ca FILE] [-user NAME -password-stdin] [-json] REGISTRY/REPO:TAG", pushDescription, pushExamples)
	cfgPath := fs.String("config", "", "image config `file` (required: the image, and where its signing key is kept)")
	keyPath := fs.String("key", "", "the signing key (ed25519, PKCS#8 PEM); empty: update-signing/image-key.pem beside the config, made when absent")
	version := fs.String("version", "", "the image's version (1.4.2), over the config's Version")
	out := fs.String("o", "", "keep the image built in this `directory` (as nvboot build -o); empty: a temporary one, removed")
	kernel := fs.String("kernel", "", "kernel to use, as for nvboot build")
	arch := fs.String("arch", "", "build for this GOARCH or target, as for nvboot build")
	src := fs.String("src", "", "the nvboot checkout, as for nvboot build")
	caFile := fs.String("ca", "", "PEM `file` of CA certificates to trust for the registry, besides the system's")
	insecure := fs.Bool("insecure", false, "talk plain HTTP to the registry (credentials and image unencrypted): a registry on loopback only")
	user := fs.String("user", "", "user `name` for the registry (HTTP Basic); the password is read from stdin with -password-stdin; empty: the Docker config's credentials")
	pwStdin := fs.Bool("password-stdin", false, "read the registry password from stdin (with -user)")
	asJSON := fs.Bool("json", false, "print the result as one JSON object on stdout")
	if err := cli.Parse(fs, c.Args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.Usagef("want one reference REGISTRY/REPO:TAG, got %q", fs.Args())
	}
	ref, err := publish.ParseRef(fs.Arg(0))
	if err != nil {
		return cli.Usagef("%v", err)
	}
	switch {
	case *cfgPath == "":
		return cli.Usagef("-config FILE is required: the image, and its signing key kept beside it")
	case *pwStdin && *user == "":
		return cli.Usagef("-password-stdin needs -user NAME")
	case *user != "" && !*pwStdin:
		return cli.Usagef("-user %s: give the password on stdin with -password-stdin (never as a flag: the process list shows flags)", *user)
	case *insecure && *caFile != "":
		return cli.Usagef("-insecure talks plain HTTP: -ca has no use there")
	}
	if *version != "" {
		if err := contract.ValidVersion(*version); err != nil {
			return cli.Usagef("-version: %v", err)
		}
	}
	log := cli.NewProgress(c.Stderr)
	r := &publish.Remote{Ref: ref, CAFile: *caFile, PlainHTTP: *insecure, User: *user, Logf: log.Printf}
	if *pwStdin {
		line, err := bufio.NewReader(c.Stdin).ReadString('\n')
		if err != nil && line == "" {
			return fmt.Errorf("-password-stdin: reading the password: %w", err)
		}
		if r.Password = strings.TrimRight(line, "\r\n"); r.Password == "" {
			return cli.Usagef("-password-stdin: the password read is empty")
		}
	}
	if *insecure {
		log.Printf("warning: -insecure: talking plain HTTP to %s: the credentials and the image travel unencrypted", ref.Registry)
	}
	// The registry first: a wrong address or password is said before a
	// build that may take minutes, and before a first key is made.
	if err := r.Check(ctx); err != nil {
		return err
	}
	key, err := pushKey(*cfgPath, *keyPath, log.Printf)
	if err != nil {
		return err
	}
	in, err := loadInputs(ctx, *cfgPath, *src, *kernel, *arch, false, c.Stderr)
	if err != nil {
		return err
	}
	if *version != "" {
		in.cfg.Version = *version
	}
	dir, err := os.MkdirTemp("", "nvboot-push-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	imgDir := filepath.Join(dir, "image")
	if *out != "" {
		if imgDir, err = appliance.AbsOut(*out); err != nil {
			return fmt.Errorf("-o: %w", err)
		}
		if err := appliance.CheckOut(imgDir); err != nil {
			return fmt.Errorf("-o: %w", err)
		}
	}
	progs := publish.NewPrograms(dir)
	// A Pi has no pmem: its image is the elf layout, its programs whole.
	layout := appliance.OFF2F
	if in.target == config.TargetRPi {
		layout = appliance.ELF
	}
	o := in.options(layout, imgDir, log.Printf)
	o.ImageKey, o.OnProgram = key.Public(), progs.Add
	res, err := appliance.BuildImage(ctx, o)
	if err != nil {
		return err
	}
	a, err := publish.Describe(imgDir, res.Image, progs)
	if err != nil {
		return err
	}
	pr, err := publish.Push(ctx, r, a, key)
	if err != nil {
		return err
	}
	if *asJSON {
		return cli.JSON(c.Stdout, pr)
	}
	return nil
}

// pushKey is the signing key: -key FILE, else the one kept beside the
// config, made first when there is none (and said so).
func pushKey(cfgPath, keyPath string, logf func(string, ...any)) (*publish.Key, error) {
	if keyPath != "" {
		k, err := publish.LoadKey(keyPath)
		if err != nil {
			return nil, fmt.Errorf("-key: %w", err)
		}
		return k, nil
	}
	cfgDir, err := filepath.Abs(filepath.Dir(cfgPath))
	if err != nil {
		return nil, fmt.Errorf("-config %s: %w", cfgPath, err)
	}
	if _, err := os.Stat(cfgPath); err != nil {
		return nil, fmt.Errorf("-config: %w", err) // before a key is made beside a config that is not there
	}
	k, created, err := publish.EnsureKey(cfgDir)
	if err != nil {
		return nil, err
	}
	if created {
		logf("made the signing key %s (ed25519, key %s) and its public half %s: appliances built from now on trust it, and no other; keep it safe and back it up",
			k.Path, k.ID(), filepath.Join(config.SigningDir(cfgDir), config.SigningPub))
	} else {
		logf("signing with %s (key %s)", k.Path, k.ID())
	}
	return k, nil
}

// imageKey is the public key an image built from the config at cfgPath
// carries: -key FILE's (a public or private key file), else the one kept
// beside the config when nvboot push has made one; nil: none.
func imageKey(cfgPath, keyPath string) ([]byte, error) {
	if keyPath != "" {
		k, err := publish.PublicKeyFile(keyPath)
		if err != nil {
			return nil, fmt.Errorf("-key: %w", err)
		}
		return k, nil
	}
	if cfgPath == "" {
		return nil, nil
	}
	cfgDir, err := filepath.Abs(filepath.Dir(cfgPath))
	if err != nil {
		return nil, fmt.Errorf("-config %s: %w", cfgPath, err)
	}
	p := filepath.Join(config.SigningDir(cfgDir), config.SigningPub)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if _, err := contract.ParseImageKey(b); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return b, nil
}
