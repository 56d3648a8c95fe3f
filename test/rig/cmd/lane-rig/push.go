package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/docker/docker/client"
	"github.com/spf13/cobra"
)

// OCI media types of what push-image writes (opencontainers/image-spec
// media-types.md): layers as plain tar, not tar+gzip.
const (
	ociManifest = "application/vnd.oci.image.manifest.v1+json"
	ociConfig   = "application/vnd.oci.image.config.v1+json"
	ociLayerTar = "application/vnd.oci.image.layer.v1.tar"
)

// newPushImage pushes a local image to the rig registry with uncompressed
// layers. docker push gzips every layer, and gunzipping them was half of
// what each node's containerd spent on a rig up (perf, 3 nodes pulling
// ~500 MB of component images); a plain-tar layer is unpacked as it is.
// The rig's images are built here and never leave the machine, so there
// is no transfer for gzip to save.
func newPushImage() *cobra.Command {
	var registry string
	cmd := &cobra.Command{
		Use:   "push-image LOCAL-IMAGE REPOSITORY:TAG",
		Short: "Push a local image to a registry (plain HTTP) with uncompressed layers; nothing if it is there already",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			docker, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
			if err != nil {
				return err
			}
			defer docker.Close()
			pushed, err := pushImage(cmd.Context(), docker, registry, args[0], args[1])
			if err != nil {
				return err
			}
			if pushed {
				fmt.Fprintf(cmd.OutOrStdout(), "pushed %s as %s/%s\n", args[0], registry, args[1])
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&registry, "registry", "127.0.0.1:5000", "registry host:port, spoken to over plain HTTP")
	return cmd
}

// pushImage pushes the local image to registry as dest (REPOSITORY:TAG),
// reporting whether it had to: nothing is sent when the registry has it.
func pushImage(ctx context.Context, docker *client.Client, registry, local, dest string) (bool, error) {
	repo, tag, ok := strings.Cut(dest, ":")
	if !ok || repo == "" || tag == "" {
		return false, fmt.Errorf("destination %q: want REPOSITORY:TAG", dest)
	}
	p := &pusher{base: "http://" + registry + "/v2/" + repo, http: http.DefaultClient}
	pushed, err := p.push(ctx, docker, local, tag)
	if err != nil {
		return false, fmt.Errorf("pushing %s to %s/%s: %w", local, registry, dest, err)
	}
	return pushed, nil
}

type pusher struct {
	base string // http://host:port/v2/<repository>
	http *http.Client
}

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

// push returns false when the registry already has tag as this image
// with plain-tar layers: the image ID is the digest of its config.
func (p *pusher) push(ctx context.Context, docker *client.Client, image, tag string) (bool, error) {
	insp, err := docker.ImageInspect(ctx, image)
	if err != nil {
		return false, err
	}
	if m, err := p.manifest(ctx, tag); err == nil && m.Config.Digest == insp.ID && len(m.Layers) > 0 && m.Layers[0].MediaType == ociLayerTar {
		return false, nil
	}
	rc, err := docker.ImageSave(ctx, []string{insp.ID})
	if err != nil {
		return false, err
	}
	defer rc.Close()
	// docker save: each layer as <dir>/layer.tar (uncompressed), the
	// config as <id>.json, then manifest.json naming them in order.
	layers := map[string]descriptor{}
	var config []byte
	var saved []struct {
		Config string
		Layers []string
	}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return false, fmt.Errorf("reading docker save: %w", err)
		}
		switch {
		case h.Typeflag == tar.TypeReg && path.Base(h.Name) == "layer.tar":
			d, err := p.upload(ctx, tr)
			if err != nil {
				return false, fmt.Errorf("layer %s: %w", h.Name, err)
			}
			layers[h.Name] = descriptor{MediaType: ociLayerTar, Digest: d, Size: h.Size}
		case h.Name == "manifest.json":
			if err := json.NewDecoder(tr).Decode(&saved); err != nil {
				return false, fmt.Errorf("docker save's manifest.json: %w", err)
			}
		case h.Typeflag == tar.TypeReg && strings.HasSuffix(h.Name, ".json") && !strings.Contains(h.Name, "/"):
			if config, err = io.ReadAll(tr); err != nil {
				return false, err
			}
		}
	}
	if len(saved) != 1 || config == nil {
		return false, fmt.Errorf("docker save gave %d images and config %t, want one with its config", len(saved), config != nil)
	}
	m := manifest{SchemaVersion: 2, MediaType: ociManifest}
	for _, l := range saved[0].Layers {
		d, ok := layers[l]
		if !ok {
			return false, fmt.Errorf("docker save names layer %s but holds none", l)
		}
		m.Layers = append(m.Layers, d)
	}
	cd, err := p.upload(ctx, bytes.NewReader(config))
	if err != nil {
		return false, fmt.Errorf("config: %w", err)
	}
	if cd != insp.ID {
		return false, fmt.Errorf("config digest %s is not the image ID %s", cd, insp.ID)
	}
	m.Config = descriptor{MediaType: ociConfig, Digest: cd, Size: int64(len(config))}
	body, err := json.Marshal(m)
	if err != nil {
		return false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, p.base+"/manifests/"+tag, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", ociManifest)
	if _, _, err := p.call(req, http.StatusCreated); err != nil {
		return false, fmt.Errorf("manifest: %w", err)
	}
	return true, nil
}

func (p *pusher) manifest(ctx context.Context, tag string) (*manifest, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/manifests/"+tag, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", ociManifest)
	_, b, err := p.call(req, http.StatusOK)
	if err != nil {
		return nil, err
	}
	m := &manifest{}
	return m, json.Unmarshal(b, m)
}

// upload streams a blob in one PATCH of an upload session (distribution
// spec, "pushing a blob in chunks" with a single chunk), hashing it on the
// way, and closes the session with its digest.
func (p *pusher) upload(ctx context.Context, r io.Reader) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+"/blobs/uploads/", nil)
	if err != nil {
		return "", err
	}
	resp, _, err := p.call(req, http.StatusAccepted)
	if err != nil {
		return "", err
	}
	loc, err := p.location(resp)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	req, err = http.NewRequestWithContext(ctx, http.MethodPatch, loc.String(), io.TeeReader(r, h))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if resp, _, err = p.call(req, http.StatusAccepted); err != nil {
		return "", err
	}
	if loc, err = p.location(resp); err != nil {
		return "", err
	}
	digest := "sha256:" + hex.EncodeToString(h.Sum(nil))
	q := loc.Query()
	q.Set("digest", digest)
	loc.RawQuery = q.Encode()
	req, err = http.NewRequestWithContext(ctx, http.MethodPut, loc.String(), nil)
	if err != nil {
		return "", err
	}
	if _, _, err := p.call(req, http.StatusCreated); err != nil {
		return "", err
	}
	return digest, nil
}

// location is an upload session's next URL, resolved against the registry.
func (p *pusher) location(resp *http.Response) (*url.URL, error) {
	l := resp.Header.Get("Location")
	if l == "" {
		return nil, fmt.Errorf("%s %s: no Location", resp.Request.Method, resp.Request.URL)
	}
	return resp.Request.URL.Parse(l)
}

// call does req and wants status; it returns the response (its body read
// and closed) and the body.
func (p *pusher) call(req *http.Request, want int) (*http.Response, []byte, error) {
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != want {
		return nil, nil, fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, strings.TrimSpace(string(b)))
	}
	return resp, b, nil
}
