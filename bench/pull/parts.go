package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/nvboot/nvboot/host/image/config"
)

// big measures the big appliance with only kv changed: the bytes its pull
// fetched against the whole image, and kv's downtime.
func (b *bench) big(ctx context.Context) error {
	const repo = "bench/big"
	dir := filepath.Join(b.work, "big")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	c, err := b.bigConfig()
	if err != nil {
		return err
	}
	cfg, err := b.appConfig(c, dir, repo, "1.0.0")
	if err != nil {
		return err
	}
	img := filepath.Join(dir, "img")
	b.log.Printf("big: building and pushing v1 (Caddy and kv)")
	res1, err := b.push(ctx, cfg, repo, img)
	if err != nil {
		return err
	}
	b.log.Printf("big: v1 is %s (%d blobs, %d bytes); booting it", res1.Digest, res1.Blobs, res1.Bytes)
	x, err := b.boot(ctx, img)
	if err != nil {
		return err
	}
	defer x.m.Kill()
	const key, value = "bench", "written before the pull"
	if err := x.put(key, value); err != nil {
		return err
	}
	if _, err := x.waitRunning(ctx, res1.Digest, 10*time.Minute); err != nil {
		return err
	}
	if _, err = b.appConfig(c, dir, repo, "1.1.0", kvChanged...); err != nil {
		return err
	}
	mark := len(b.reg.Requests())
	b.log.Printf("big: v1 runs; pushing v2 (kv changed)")
	res2, err := b.push(ctx, cfg, repo, "")
	if err != nil {
		return err
	}
	st, err := x.waitRunning(ctx, res2.Digest, 10*time.Minute)
	if err != nil {
		return err
	}
	kv, err := deployed(st)
	if err != nil {
		return err
	}
	if err := x.check(key, value); err != nil {
		return err
	}
	all, blobs, err := pulled(b.reg.Requests()[mark:], repo, st.LastInstall.Blobs)
	if err != nil {
		return err
	}
	// Two counts of one pull: the registry's log and nvpull's own.
	if li := st.LastInstall; blobs != li.Downloaded {
		return fmt.Errorf("the registry served nvpull %d bytes of the blobs %v, nvpull counts %d downloaded", blobs, li.Blobs, li.Downloaded)
	}
	b.ratios["update_bytes.one_service_vs_whole"] = float64(all) / float64(res2.Bytes)
	b.samples.Add("big.pulled", "MB", float64(all)/1e6)
	b.samples.Add("big.pulled_blobs", "MB", float64(blobs)/1e6)
	b.samples.Add("big.image", "MB", float64(res2.Bytes)/1e6)
	b.samples.Add("big.kv_downtime", "ms", float64(kv.Downtime)/1e6)
	b.samples.Add("big.kv_ready", "ms", float64(kv.Ready)/1e6)
	li := st.LastInstall
	b.samples.Add("big.install", "s", li.Ended.Sub(li.Started).Seconds())
	b.log.Printf("big: v2 installed by deploy: pulled %d bytes (%d of blobs) of a %d-byte image (%.4f), kv down %v on the device clock",
		all, blobs, res2.Bytes, float64(all)/float64(res2.Bytes), kv.Downtime)
	return nil
}

// fleet measures the time from a push to every appliance of the fleet
// serving it, each on its own clock.
func (b *bench) fleet(ctx context.Context) error {
	const repo = "bench/fleet"
	dir := filepath.Join(b.work, "fleet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfg, err := b.appConfig(config.Demo(), dir, repo, "1.0.0")
	if err != nil {
		return err
	}
	img := filepath.Join(dir, "img")
	b.log.Printf("fleet: building and pushing v1 (kv)")
	res1, err := b.push(ctx, cfg, repo, img)
	if err != nil {
		return err
	}
	boxes := make([]*box, b.o.fleet)
	for i := range boxes {
		d := filepath.Join(dir, fmt.Sprintf("box%d", i))
		if out, err := exec.Command("cp", "-a", "--sparse=always", img, d).CombinedOutput(); err != nil {
			return fmt.Errorf("copying the image: %v\n%s", err, out)
		}
		b.log.Printf("fleet: booting appliance %d", i)
		x, err := b.boot(ctx, d)
		if err != nil {
			return fmt.Errorf("appliance %d: %w", i, err)
		}
		defer x.m.Kill()
		boxes[i] = x
	}
	for i, x := range boxes {
		if _, err := x.waitRunning(ctx, res1.Digest, 10*time.Minute); err != nil {
			return fmt.Errorf("appliance %d: %w", i, err)
		}
		if err := x.put("box", fmt.Sprint(i)); err != nil {
			return fmt.Errorf("appliance %d: %w", i, err)
		}
	}
	if _, err = b.appConfig(config.Demo(), dir, repo, "1.1.0", kvChanged...); err != nil {
		return err
	}
	b.log.Printf("fleet: %d appliances run v1; pushing v2 (kv changed)", len(boxes))
	res2, err := b.push(ctx, cfg, repo, "")
	if err != nil {
		return err
	}
	// The push's end on each appliance's clock: read at once, all
	// together, right after the tag moved.
	pushedAt := make([]time.Time, len(boxes))
	errs := make([]error, len(boxes))
	var wg sync.WaitGroup
	for i, x := range boxes {
		wg.Go(func() { _, pushedAt[i], errs[i] = x.status(ctx) })
	}
	wg.Wait()
	var longest time.Duration
	for i, x := range boxes {
		if errs[i] != nil {
			return fmt.Errorf("appliance %d: its clock at the push: %w", i, errs[i])
		}
		st, err := x.waitRunning(ctx, res2.Digest, 10*time.Minute)
		if err != nil {
			return fmt.Errorf("appliance %d: %w", i, err)
		}
		kv, err := deployed(st)
		if err != nil {
			return fmt.Errorf("appliance %d: %w", i, err)
		}
		if err := x.check("box", fmt.Sprint(i)); err != nil {
			return fmt.Errorf("appliance %d: %w", i, err)
		}
		li := st.LastInstall
		if li.Started.Before(pushedAt[i]) {
			return fmt.Errorf("appliance %d began installing v2 at %s, before the push ended at %s on its clock", i, li.Started, pushedAt[i])
		}
		toServing := li.Ended.Sub(pushedAt[i])
		longest = max(longest, toServing)
		b.samples.Add("fleet.push_to_serving", "s", toServing.Seconds())
		b.samples.Add("fleet.push_to_poll", "s", li.Started.Sub(pushedAt[i]).Seconds())
		b.samples.Add("fleet.install", "s", li.Ended.Sub(li.Started).Seconds())
		b.samples.Add("fleet.kv_downtime", "ms", float64(kv.Downtime)/1e6)
		b.samples.Add("fleet.pulled_blobs", "MB", float64(li.Downloaded)/1e6)
		b.log.Printf("fleet: appliance %d serves v2 %v after the push on its clock (its poll %v after it, install %v, kv down %v)", i,
			toServing.Round(time.Millisecond), li.Started.Sub(pushedAt[i]).Round(time.Millisecond), li.Ended.Sub(li.Started).Round(time.Millisecond), kv.Downtime)
	}
	b.samples.Add("fleet.push_to_all_serving", "s", longest.Seconds())
	b.samples.Add("fleet.poll_interval", "s", b.o.poll.Seconds())
	b.log.Printf("fleet: every appliance serves v2 %v after the push, each on its clock; poll every %v", longest.Round(time.Millisecond), b.o.poll)
	return nil
}
