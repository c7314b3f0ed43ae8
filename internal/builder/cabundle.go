package builder

import (
	"path"

	corev1 "k8s.io/api/core/v1"

	embedopsv1 "github.com/embedops/embedops/api/v1alpha1"
)

// The CA bundle of spec.model.caBundleRef, in TEI and the downloader.
const (
	// caBundleVolumeName names the pod volume of the bundle.
	caBundleVolumeName = "ca-bundle"
	// CABundleDir is where the bundle is mounted, read-only.
	CABundleDir = "/etc/embedops/ca"
	// caBundleFile is the bundle's file name in CABundleDir.
	caBundleFile = "ca.crt"
	// caBundleFileEnv names the bundle's path. TEI's HTTP client is reqwest
	// with native-tls, which is OpenSSL on Linux (TEI Cargo.lock, v1.9.3);
	// OpenSSL's default verify paths read SSL_CERT_FILE
	// (crypto/x509/x509_def.c, X509_get_default_cert_file_env). Go's
	// crypto/x509 reads it too (root_unix.go), for the populator.
	caBundleFileEnv = "SSL_CERT_FILE"
	// caBundleMode is the bundle file's mode: world-readable, as it is
	// public data and TEI runs as runAsID.
	caBundleMode int32 = 0o444
)

// caBundleVolumes are the pod volume of the server's CA bundle, its key
// projected as caBundleFile, or none.
func caBundleVolumes(server *embedopsv1.EmbeddingServer) []corev1.Volume {
	ref := server.Spec.Model.CABundleRef
	if ref == nil {
		return nil
	}
	items := []corev1.KeyToPath{{Key: CABundleKey(ref), Path: caBundleFile}}
	volume := corev1.Volume{Name: caBundleVolumeName}
	if ref.Kind == "Secret" {
		volume.Secret = &corev1.SecretVolumeSource{SecretName: ref.Name, Items: items, DefaultMode: new(caBundleMode)}
	} else {
		volume.ConfigMap = &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ref.Name}, Items: items, DefaultMode: new(caBundleMode),
		}
	}
	return []corev1.Volume{volume}
}

// caBundleMounts mount the bundle read-only at CABundleDir, or nothing.
func caBundleMounts(server *embedopsv1.EmbeddingServer) []corev1.VolumeMount {
	if server.Spec.Model.CABundleRef == nil {
		return nil
	}
	return []corev1.VolumeMount{{Name: caBundleVolumeName, MountPath: CABundleDir, ReadOnly: true}}
}

// caBundleEnv points SSL_CERT_FILE at the mounted bundle, or is empty.
func caBundleEnv(server *embedopsv1.EmbeddingServer) []corev1.EnvVar {
	if server.Spec.Model.CABundleRef == nil {
		return nil
	}
	return []corev1.EnvVar{{Name: caBundleFileEnv, Value: path.Join(CABundleDir, caBundleFile)}}
}

// CABundleKey is the bundle's key, defaulted as the schema does.
func CABundleKey(ref *embedopsv1.CABundleRef) string {
	if ref.Key == "" {
		return caBundleFile
	}
	return ref.Key
}
