"""Point-cloud augmentation."""
