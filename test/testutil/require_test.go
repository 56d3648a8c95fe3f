package testutil

import (
	"testing"

	"github.com/sriov-lane/sriov-lane/pkg/cni"
)

// Images the rig builds from upstream modules must carry exactly the names
// the product deploys, or the product would look for images that are not there.
func TestUpstreamNamedImagesAreTheProducts(t *testing.T) {
	if FlannelImage != cni.FlannelImage {
		t.Errorf("testutil.FlannelImage %q != cni.FlannelImage %q", FlannelImage, cni.FlannelImage)
	}
	if MultusImage != cni.MultusImage {
		t.Errorf("testutil.MultusImage %q != cni.MultusImage %q", MultusImage, cni.MultusImage)
	}
}
