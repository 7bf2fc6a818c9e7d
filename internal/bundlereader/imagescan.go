package bundlereader

import (
	"fmt"
	"maps"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/names"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// imageScans are the ImageScans the bundle folder's fleet.yaml declares (imageScans[]): named
// after the bundle and the scan (or its position), writing to the GitRepo the run is for, and
// labelled with it so a later run prunes those no longer declared (and with the GitRepo's shard,
// if it has one).
func imageScans(root string, d BundleDir, bundle string, o Options) ([]*fleet.ImageScan, error) {
	if d.FleetYAML == "" {
		return nil, nil
	}
	fy, err := readFleetYAML(root, d)
	if err != nil || len(fy.ImageScans) == 0 {
		return nil, err
	}
	labels := map[string]string{fleet.RepoLabel: o.Name}
	if shard := o.Labels[fleet.ShardLabel]; shard != "" {
		// The GitRepo's shard handles its ImageScans, as it handles its Bundles.
		labels[fleet.ShardLabel] = shard
	}
	var out []*fleet.ImageScan
	for i, s := range fy.ImageScans {
		key := fmt.Sprintf("imageScans[%d]", i)
		bad := func(field, format string, args ...any) error {
			return &InputError{File: d.FleetYAML, Key: key + field, Msg: fmt.Sprintf(format, args...)}
		}
		if s.Image == "" {
			return nil, bad(".image", "is empty: name the image repository to scan")
		}
		interval := o.ImageScanInterval
		if s.Interval != "" {
			if interval, err = time.ParseDuration(s.Interval); err != nil || interval <= 0 {
				return nil, bad(".interval", "%q is not a positive duration", s.Interval)
			}
		}
		name := s.Name
		if name == "" {
			name = strconv.Itoa(i)
		}
		tagName := s.TagName
		if tagName == "" {
			tagName = name
		}
		out = append(out, &fleet.ImageScan{
			TypeMeta: metav1.TypeMeta{APIVersion: fleet.SchemeGroupVersion.String(), Kind: "ImageScan"},
			ObjectMeta: metav1.ObjectMeta{Name: names.SafeConcatName(bundle, name), Namespace: o.Namespace,
				Labels: maps.Clone(labels)},
			Spec: fleet.ImageScanSpec{TagName: tagName, GitRepoName: o.Name, Image: s.Image, Interval: metav1.Duration{Duration: interval},
				SecretRef: s.SecretRef, Suspend: s.Suspend, Policy: s.Policy},
		})
	}
	return out, nil
}
