"""The shared front end of both modes: source, fence, normalize, activity."""
