// Package derive makes the device's configs (device/contract) from an image
// config (host/image/config): what nvinit and poold of an image read. It is
// the one place the host's shape of a service (config.PackageConfig) is
// turned into the device's (contract.Service, contract.Program).
//
// # Design
//
//   - A package apart from device/contract, so that the device side, which
//     imports the contract, does not link the host's config, and the host
//     turns its shapes of a service (local package, import path, gokrazy
//     package, pooled service) into the device's in one place.
//   - FromImage validates both configs with the contract's own Validate
//     before anything is built: what the device would refuse is refused at
//     build time, every bad field named.
//   - poold is a service like the others, started first and ready on its
//     socket, only when a service has Pool; each pooled service gets one
//     pool with its argv and environment, spawnable by uid 0 (nvinit) only.
//     A pooled service's spawn that finds no socket yet is retried by
//     nvinit's backoff.
//   - A gokrazy config's services run as gokrazy's init runs them
//     (Service.Gokrazy, restarted on failure only); its MountDevices by
//     /dev/ path are mounted by nvinit, others left out (nvinit has no udev
//     to resolve PARTUUID= or labels; config warns about them).
//   - With Userland "u-root" nvinit runs /bbin/gosh on the console
//     (InitConfig.Shell).
//   - With Update.Registry nvinit's config has Pull (nvinit starts nvpull);
//     an image that could install nothing it pulls (no text store for a
//     deploy, nor a Pi card's state for a whole program's; no Slots 2 for
//     an A/B update) is refused, saying so.
//
// # Invariants
//
//   - Services appear in Packages order, each found by its program name,
//     poold first when pooled: TestFromImage, TestPooledServices.
//   - What the device would refuse is refused here, naming the config and
//     the field: TestFromImageValidates.
//   - gokrazy configs: TestFromGokrazyConfig; the shell: TestUserlandShell;
//     the puller: TestPullNeedsSomewhereToInstall.
//
// # Limits
//
//   - Only root may spawn from the pools derive makes.
package derive
